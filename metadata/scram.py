"""SCRAM credentials of API keys (migration 0011), as Kafka stores a SCRAM user's.

The username is the key's id and the password the whole API key, as for SASL/PLAIN; what is
stored is RFC 5802's salted StoredKey and ServerKey (scramp derives them), never the key.
A credential is set only by someone who holds the key (it is checked against the key's
scrypt hash first) and is usable only while the key is not revoked. Kafka's
AlterUserScramCredentials may also set one from a client's salted password (`set_salted`):
the key's user then logs in with that password instead.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import NamedTuple

from sqlalchemy import (
    Column,
    DateTime,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    delete,
    func,
    select,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Engine

from metadata.api_keys import parse_key, verify_secret
from metadata.security import SecurityRepo, api_keys

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_DIGESTS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
ITERATIONS = 4096  # Kafka's default (and minimum) for SCRAM credentials

_meta = MetaData()
scram_credentials = Table(
    "scram_credentials",
    _meta,
    Column("key_id", Text, primary_key=True),
    Column("mechanism", Text, primary_key=True),
    Column("salt", LargeBinary, nullable=False),
    Column("stored_key", LargeBinary, nullable=False),
    Column("server_key", LargeBinary, nullable=False),
    Column("iterations", Integer, nullable=False),
    Column("updated_at", DateTime(timezone=True), server_default=func.now()),
)


class ScramCredential(NamedTuple):
    principal: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class ScramRepo:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def set_for_key(self, key: str, mechanisms: tuple[str, ...] = MECHANISMS) -> tuple[str, str]:
        """Store SCRAM credentials of `key` (its own secret as the password) for each of
        `mechanisms`: (key id, principal). ValueError when the key is not a live key."""
        mechanisms = tuple(dict.fromkeys(mechanisms))  # each once: one row per mechanism
        unknown = [m for m in mechanisms if m not in MECHANISMS]
        if unknown or not mechanisms:
            raise ValueError(f"mechanisms must be among {', '.join(MECHANISMS)}")
        parsed = parse_key(key)
        stored = SecurityRepo(self.engine).find_key(parsed) if parsed else None
        if parsed is None or stored is None or stored.revoked:
            raise ValueError("not an active API key")
        if not verify_secret(parsed.secret, stored.salt, stored.hash):
            raise ValueError("not an active API key")
        # scramp (with asn1crypto: ~25 ms of CPU to import) only where credentials are made,
        # not in every broker and CLI process that imports this module.
        from scramp import ScramMechanism

        rows = []
        for name in mechanisms:
            salt, stored_key, server_key, n = ScramMechanism(name).make_auth_info(
                key, iteration_count=ITERATIONS
            )
            rows.append(
                {
                    "key_id": parsed.key_id,
                    "mechanism": name,
                    "salt": salt,
                    "stored_key": stored_key,
                    "server_key": server_key,
                    "iterations": n,
                }
            )
        stmt = insert(scram_credentials).values(rows)
        stmt = stmt.on_conflict_do_update(
            index_elements=["key_id", "mechanism"],
            set_={c: stmt.excluded[c] for c in ("salt", "stored_key", "server_key", "iterations")}
            | {"updated_at": func.now()},
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)
        return parsed.key_id, stored.principal

    def set_salted(
        self, key_id: str, mechanism: str, salt: bytes, salted_password: bytes, iterations: int
    ) -> bool:
        """Store a credential from a client's SaltedPassword (RFC 5802's Hi(password, salt,
        i), as Kafka's AlterUserScramCredentials carries it): the StoredKey and ServerKey
        derived from it. False when `key_id` is no live key (a SCRAM user is a key)."""
        digest = _DIGESTS[mechanism]
        client_key = hmac.digest(salted_password, b"Client Key", digest)
        row = {
            "key_id": key_id,
            "mechanism": mechanism,
            "salt": salt,
            "stored_key": hashlib.new(digest, client_key).digest(),
            "server_key": hmac.digest(salted_password, b"Server Key", digest),
            "iterations": iterations,
        }
        stmt = insert(scram_credentials).values([row])
        stmt = stmt.on_conflict_do_update(
            index_elements=["key_id", "mechanism"],
            set_={c: stmt.excluded[c] for c in ("salt", "stored_key", "server_key", "iterations")}
            | {"updated_at": func.now()},
        )
        live = select(api_keys.c.id).where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
        with self.engine.begin() as conn:
            if conn.execute(live.with_for_update()).first() is None:
                return False
            conn.execute(stmt)
        return True

    def delete(self, key_id: str, mechanism: str) -> bool:
        """Remove a key's credential for `mechanism`; False when it had none."""
        c = scram_credentials.c
        with self.engine.begin() as conn:
            gone = conn.execute(
                delete(scram_credentials).where(c.key_id == key_id, c.mechanism == mechanism)
            )
        return bool(gone.rowcount)

    def find(self, key_id: str, mechanism: str) -> ScramCredential | None:
        """The credential of a live (not revoked) key, else None."""
        c = scram_credentials.c
        query = (
            select(api_keys.c.principal, c.salt, c.stored_key, c.server_key, c.iterations)
            .join(api_keys, api_keys.c.id == c.key_id)
            .where(c.key_id == key_id, c.mechanism == mechanism, api_keys.c.revoked_at.is_(None))
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else ScramCredential(*row)

    def described(self) -> dict[str, list[tuple[str, int]]]:
        """Every live key's SCRAM mechanisms and iterations, by key id (the SCRAM username):
        what Kafka's DescribeUserScramCredentials shows (never a salt or a key)."""
        c = scram_credentials.c
        query = (
            select(c.key_id, c.mechanism, c.iterations)
            .join(api_keys, api_keys.c.id == c.key_id)
            .where(api_keys.c.revoked_at.is_(None))
            .order_by(c.key_id, c.mechanism)
        )
        out: dict[str, list[tuple[str, int]]] = {}
        with self.engine.connect() as conn:
            for key_id, mechanism, iterations in conn.execute(query):
                out.setdefault(str(key_id), []).append((str(mechanism), int(iterations)))
        return out
