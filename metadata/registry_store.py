"""The Schema Registry's state in Postgres (migration 0010): schemas under global ids,
subjects' versions (soft- and hard-deleted), and per-subject / global settings.

Writes to one subject hold a transaction-level advisory lock on the subject (so a version is
checked against exactly the versions it will follow), then one on the schema's identity (so
one schema gets one id even when two subjects register it at once); always in that order.
A hard delete sends ``NOTIFY tierlog_registry`` so nodes drop the ids they cached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    DateTime,
    Integer,
    MetaData,
    Table,
    Text,
    and_,
    delete,
    func,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.engine import Engine

REGISTRY_CHANNEL = "tierlog_registry"
GLOBAL = ""  # registry_settings' subject for the global settings
_LOCK_SUBJECT, _LOCK_IDENTITY = 0x7265_6701, 0x7265_6702  # advisory lock classes

_meta = MetaData()
schemas = Table(
    "registry_schemas",
    _meta,
    Column("id", Integer, primary_key=True),
    Column("schema_type", Text, nullable=False),
    Column("schema_text", Text, nullable=False),
    Column("refs", JSONB, nullable=False),
    Column("identity", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), server_default=func.now()),
)
versions = Table(
    "registry_versions",
    _meta,
    Column("subject", Text, primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("schema_id", Integer, nullable=False),
    Column("deleted", Boolean, nullable=False),
    Column("created_at", DateTime(timezone=True), server_default=func.now()),
)
settings = Table(
    "registry_settings",
    _meta,
    Column("subject", Text, primary_key=True),
    Column("compatibility", Text),
    Column("mode", Text),
)


class StoredRef(NamedTuple):
    name: str
    subject: str
    version: int


class StoredSchema(NamedTuple):
    id: int
    schema_type: str
    text: str
    references: tuple[StoredRef, ...]


class StoredVersion(NamedTuple):
    subject: str
    version: int
    schema_id: int
    deleted: bool


class NewSchema(NamedTuple):
    """A schema to register: `identity` names what makes two schemas the same one."""

    schema_type: str
    text: str
    references: tuple[StoredRef, ...]
    identity: str


class IdConflict(Exception):
    """IMPORT named an id, or a version, that already holds another schema."""


class Registered(NamedTuple):
    schema_id: int
    version: int
    created: bool  # False: the subject already had this schema (its version is answered)


def _refs_json(refs: Iterable[StoredRef]) -> list[dict[str, Any]]:
    return [{"name": r.name, "subject": r.subject, "version": r.version} for r in refs]


def _stored(row: Any) -> StoredSchema:
    refs = tuple(StoredRef(r["name"], r["subject"], int(r["version"])) for r in row.refs)
    return StoredSchema(row.id, row.schema_type, row.schema_text, refs)


def _lock(conn: Connection, kind: int, key: str) -> None:
    conn.execute(text("SELECT pg_advisory_xact_lock(:k, hashtext(:v))"), {"k": kind, "v": key})


class RegistryStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- reads ------------------------------------------------------------------------------

    def schema(self, schema_id: int) -> StoredSchema | None:
        """The schema under `schema_id` while some version (soft-deleted too) uses it."""
        used = select(versions.c.schema_id).where(versions.c.schema_id == schema_id).exists()
        with self.engine.connect() as conn:
            row = conn.execute(select(schemas).where(schemas.c.id == schema_id, used)).first()
        return None if row is None else _stored(row)

    def schemas_by_identity(self, identity: str) -> list[StoredSchema]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(schemas).where(schemas.c.identity == identity).order_by(schemas.c.id)
            ).all()
        return [_stored(r) for r in rows]

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        """Subjects with a live version (with `deleted`: with any version)."""
        q = select(versions.c.subject).distinct().order_by(versions.c.subject)
        if not deleted:
            q = q.where(versions.c.deleted.is_(False))
        if prefix:
            q = q.where(func.starts_with(versions.c.subject, prefix))
        with self.engine.connect() as conn:
            return list(conn.execute(q).scalars())

    def versions(self, subject: str) -> list[StoredVersion]:
        """Every version of `subject` (soft-deleted ones too), oldest first."""
        with self.engine.connect() as conn:
            return self._versions(conn, subject)

    @staticmethod
    def _versions(conn: Connection, subject: str) -> list[StoredVersion]:
        rows = conn.execute(
            select(versions.c.subject, versions.c.version, versions.c.schema_id, versions.c.deleted)
            .where(versions.c.subject == subject)
            .order_by(versions.c.version)
        ).all()
        return [StoredVersion(*r) for r in rows]

    def uses_of(self, schema_id: int, deleted: bool = False) -> list[StoredVersion]:
        """The (subject, version)s registered with `schema_id`."""
        q = select(
            versions.c.subject, versions.c.version, versions.c.schema_id, versions.c.deleted
        ).where(versions.c.schema_id == schema_id)
        if not deleted:
            q = q.where(versions.c.deleted.is_(False))
        with self.engine.connect() as conn:
            rows = conn.execute(q.order_by(versions.c.subject, versions.c.version)).all()
        return [StoredVersion(*r) for r in rows]

    def live_subjects_of(self, ids: Sequence[int]) -> dict[int, frozenset[str]]:
        """For each id, the subjects with a live version of it (absent: none)."""
        q = select(versions.c.schema_id, versions.c.subject).where(
            versions.c.schema_id.in_(list(ids)), versions.c.deleted.is_(False)
        )
        out: dict[int, set[str]] = {}
        with self.engine.connect() as conn:
            for schema_id, subject in conn.execute(q):
                out.setdefault(schema_id, set()).add(subject)
        return {k: frozenset(v) for k, v in out.items()}

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the schemas, in a live version, that reference `subject` `version`."""
        needle = [{"subject": subject, "version": version}]
        live = select(versions.c.schema_id).where(
            versions.c.schema_id == schemas.c.id, versions.c.deleted.is_(False)
        )
        q = select(schemas.c.id).where(schemas.c.refs.contains(needle), live.exists())
        with self.engine.connect() as conn:
            return list(conn.execute(q.order_by(schemas.c.id)).scalars())

    # -- registration -----------------------------------------------------------------------

    def register(
        self,
        subject: str,
        new: NewSchema,
        check: Callable[[list[StoredVersion]], None],
        schema_id: int | None = None,
        version: int | None = None,
    ) -> Registered:
        """Register `new` under `subject`, or answer the version that already has it.

        `check` sees the subject's versions under the subject's lock and raises to refuse
        (compatibility). `schema_id` / `version`: IMPORT mode's explicit values."""
        with self.engine.begin() as conn:
            _lock(conn, _LOCK_SUBJECT, subject)
            existing = self._versions(conn, subject)
            _lock(conn, _LOCK_IDENTITY, new.identity)
            known = self._id_for(conn, new.identity, schema_id)
            for v in existing:
                if v.schema_id == known and not v.deleted and (version in (None, v.version)):
                    return Registered(v.schema_id, v.version, False)
            taken = next((v for v in existing if v.version == version), None)
            if taken is not None:  # IMPORT never rewrites a version that holds another schema
                raise IdConflict(f"version {version} of subject {subject} holds another schema")
            check(existing)
            sid = known if known is not None else self._new_id(conn, new, schema_id)
            number = (
                version
                if version is not None
                else max((v.version for v in existing), default=0) + 1
            )
            conn.execute(
                insert(versions).values(
                    subject=subject, version=number, schema_id=sid, deleted=False
                )
            )
            return Registered(sid, number, True)

    @staticmethod
    def _id_for(conn: Connection, identity: str, wanted: int | None) -> int | None:
        q = select(schemas.c.id).where(schemas.c.identity == identity)
        if wanted is not None:
            q = q.where(schemas.c.id == wanted)
        return conn.execute(q.order_by(schemas.c.id).limit(1)).scalar()

    @staticmethod
    def _new_id(conn: Connection, new: NewSchema, wanted: int | None) -> int:
        if wanted is not None:
            taken = conn.execute(select(schemas.c.id).where(schemas.c.id == wanted)).scalar()
            if taken is not None:
                raise IdConflict(f"schema id {wanted} already holds another schema")
            # Later ids are allocated past every imported one, so they never collide.
            conn.execute(
                text(
                    "SELECT setval('registry_schema_ids', "
                    "GREATEST(:id, (SELECT last_value FROM registry_schema_ids)))"
                ),
                {"id": wanted},
            )
            sid = wanted
        else:
            sid = int(conn.execute(text("SELECT nextval('registry_schema_ids')")).scalar_one())
        conn.execute(
            insert(schemas).values(
                id=sid,
                schema_type=new.schema_type,
                schema_text=new.text,
                refs=_refs_json(new.references),
                identity=new.identity,
            )
        )
        return sid

    # -- deletes ----------------------------------------------------------------------------

    def soft_delete(self, subject: str, version_numbers: Sequence[int]) -> None:
        with self.engine.begin() as conn:
            _lock(conn, _LOCK_SUBJECT, subject)
            conn.execute(
                update(versions)
                .where(versions.c.subject == subject, versions.c.version.in_(list(version_numbers)))
                .values(deleted=True)
            )

    def hard_delete(self, subject: str, version_numbers: Sequence[int]) -> None:
        with self.engine.begin() as conn:
            _lock(conn, _LOCK_SUBJECT, subject)
            conn.execute(
                delete(versions).where(
                    versions.c.subject == subject, versions.c.version.in_(list(version_numbers))
                )
            )
            conn.execute(text("SELECT pg_notify(:c, :s)"), {"c": REGISTRY_CHANNEL, "s": subject})

    # -- settings ---------------------------------------------------------------------------

    def setting(self, subject: str, name: str) -> str | None:
        """`compatibility` or `mode` of `subject` (GLOBAL: the global one); None: not set."""
        column = settings.c[name]
        with self.engine.connect() as conn:
            return conn.execute(select(column).where(settings.c.subject == subject)).scalar()

    def set_setting(self, subject: str, name: str, value: str | None) -> None:
        ins = insert(settings).values(subject=subject, **{name: value})
        with self.engine.begin() as conn:
            conn.execute(
                ins.on_conflict_do_update(index_elements=[settings.c.subject], set_={name: value})
            )
            conn.execute(
                delete(settings).where(
                    and_(
                        settings.c.subject == subject,
                        settings.c.compatibility.is_(None),
                        settings.c.mode.is_(None),
                    )
                )
            )
