"""Principals, API keys and ACLs in Postgres (migration 0006): the narrow repository the
servers (key lookup, ACL load) and `tierlog users` / `tierlog acls` use.

Tables are declared here rather than in schema.py: nothing else queries them.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    LargeBinary,
    MetaData,
    Table,
    Text,
    delete,
    func,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Engine

from metadata.acl import AclBinding, validate
from metadata.api_keys import ParsedKey, hash_secret, new_key, parse_key

SECURITY_CHANNEL = "tierlog_security"  # NOTIFY'd by migration 0006's triggers

_meta = MetaData()
principals = Table(
    "principals",
    _meta,
    Column("name", Text, primary_key=True),
    Column("created_at", DateTime(timezone=True), server_default=func.now()),
)
api_keys = Table(
    "api_keys",
    _meta,
    Column("id", Text, primary_key=True),
    Column("principal", Text, nullable=False),
    Column("salt", LargeBinary, nullable=False),
    Column("hash", LargeBinary, nullable=False),
    Column("description", Text),
    Column("created_at", DateTime(timezone=True), server_default=func.now()),
    Column("revoked_at", DateTime(timezone=True)),
)
acls = Table(
    "acls",
    _meta,
    Column("id", BigInteger, primary_key=True),
    Column("principal", Text, nullable=False),
    Column("resource_type", Text, nullable=False),
    Column("pattern_type", Text, nullable=False),
    Column("resource_name", Text, nullable=False),
    Column("operation", Text, nullable=False),
    Column("permission", Text, nullable=False),
)


class StoredKey(NamedTuple):
    key_id: str
    principal: str
    salt: bytes
    hash: bytes
    revoked: bool


class KeyInfo(NamedTuple):
    key_id: str
    principal: str
    description: str | None
    created_at: datetime
    revoked_at: datetime | None


def user_principal(name: str) -> str:
    """`alice` or `User:alice` → `User:alice`; ValueError for names Kafka would not take."""
    principal = name if name.startswith("User:") else f"User:{name}"
    user = principal[len("User:") :]
    if not user or "*" in user or any(c.isspace() for c in user):
        raise ValueError(f"a user name must be non-empty, without spaces or '*'; got {name!r}")
    return principal


class SecurityRepo:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- keys -------------------------------------------------------------------------------

    def create_key(
        self, user: str, description: str | None = None, key: str | None = None
    ) -> tuple[str, str]:
        """(principal, key): the user (created if new) gets a key; `key` imports a given
        one (a bootstrap key from the environment), else a fresh one is made. Idempotent
        for an imported key already stored for the same user."""
        principal = user_principal(user)
        if key is None:
            key, parsed = new_key()
        else:
            got = parse_key(key)
            if got is None:
                raise ValueError("a key must read tlk_<12 hex>_<secret of 32+ characters>")
            parsed = got
        salt, digest = hash_secret(parsed.secret)
        with self.engine.begin() as conn:
            conn.execute(insert(principals).values(name=principal).on_conflict_do_nothing())
            done = conn.execute(
                insert(api_keys)
                .values(
                    id=parsed.key_id,
                    principal=principal,
                    salt=salt,
                    hash=digest,
                    description=description,
                )
                .on_conflict_do_nothing()
            )
            if done.rowcount == 0:
                owner = conn.execute(
                    select(api_keys.c.principal).where(api_keys.c.id == parsed.key_id)
                ).scalar_one()
                if owner != principal:
                    raise ValueError(f"key id {parsed.key_id} belongs to another principal")
        return principal, key

    def find_key(self, parsed: ParsedKey) -> StoredKey | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(
                    api_keys.c.principal,
                    api_keys.c.salt,
                    api_keys.c.hash,
                    api_keys.c.revoked_at,
                ).where(api_keys.c.id == parsed.key_id)
            ).first()
        if row is None:
            return None
        return StoredKey(
            parsed.key_id,
            row.principal,
            bytes(row.salt),
            bytes(row.hash),
            row.revoked_at is not None,
        )

    def list_keys(self) -> list[KeyInfo]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(
                    api_keys.c.id,
                    api_keys.c.principal,
                    api_keys.c.description,
                    api_keys.c.created_at,
                    api_keys.c.revoked_at,
                ).order_by(api_keys.c.principal, api_keys.c.created_at)
            ).all()
        return [KeyInfo(*r) for r in rows]

    def revoke(self, user: str, key_id: str | None = None) -> list[str]:
        """Revoke one key of the user (`key_id`) or all its live keys: the ids revoked."""
        principal = user_principal(user)
        stmt = (
            update(api_keys)
            .where(api_keys.c.principal == principal, api_keys.c.revoked_at.is_(None))
            .values(revoked_at=func.now())
            .returning(api_keys.c.id)
        )
        if key_id is not None:
            stmt = stmt.where(api_keys.c.id == key_id)
        with self.engine.begin() as conn:
            return list(conn.execute(stmt).scalars())

    # -- ACLs -------------------------------------------------------------------------------

    def add_acl(self, binding: AclBinding) -> bool:
        """True when added, False when the same binding already existed."""
        validate(binding)
        # RETURNING names the row inserted: this INSERT's rowcount read 0 for a new row too,
        # so `tierlog acls add` said "exists" on every add.
        stmt = insert(acls).values(**binding._asdict()).on_conflict_do_nothing()
        with self.engine.begin() as conn:
            return conn.execute(stmt.returning(acls.c.id)).first() is not None

    def remove_acl(self, binding: AclBinding) -> bool:
        cols = acls.c
        with self.engine.begin() as conn:
            done = conn.execute(
                delete(acls).where(*(cols[k] == v for k, v in binding._asdict().items()))
            )
        return done.rowcount > 0

    def acls(self) -> list[AclBinding]:
        cols = [acls.c[f] for f in AclBinding._fields]
        with self.engine.connect() as conn:
            rows = conn.execute(select(*cols).order_by(acls.c.id)).all()
        return [AclBinding(*r) for r in rows]
