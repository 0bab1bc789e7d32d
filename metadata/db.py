"""Engine creation and schema migration (Alembic, programmatic, safe under concurrency)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from metadata import db_errors, pool_ping
from metadata.schema import NOTIFY_CHANNEL

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "MIGRATIONS_DIR",
    "NOTIFY_CHANNEL",
    "SCHEMA_HEAD",
    "make_engine",
    "migrate",
    "schema_revision",
    "single_statements",
]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# The newest migration's revision (tests/integration/test_metadata.py keeps it equal to
# Alembic's head): a process finding the schema there starts without loading Alembic and
# every migration script, ~0.08 s of CPU per broker or worker start (measured: 0.985 -> 0.91).
SCHEMA_HEAD = "0016_log_starts"
# Any fixed 64-bit key; it only has to be the same in every process that migrates.
_MIGRATE_LOCK_KEY = 0x7469_6572_6C6F_6701  # "tierlog" + 1


def make_engine(url: str, **kwargs: object) -> Engine:
    """An engine on psycopg 3; plain postgresql:// (or postgres://) URLs are accepted. Its
    errors leave it as failures/ families (metadata/db_errors.py)."""
    u = make_url(url)
    if u.drivername in ("postgresql", "postgres", "postgresql+psycopg2"):
        u = u.set(drivername="postgresql+psycopg")
    if u.drivername != "postgresql+psycopg":
        raise ValueError(
            f"unsupported database URL {u.render_as_string(hide_password=True)}: "
            "tierlog needs PostgreSQL (postgresql://...)"
        )
    # A pooled connection may have died with a Postgres restart (`tierlog dev`): one idle for
    # a while is pinged before use (metadata/pool_ping.py), not every one (pool_pre_ping).
    # connect_timeout: a frozen or unreachable server fails a new connection in seconds, and
    # pool_timeout bounds the wait for a pooled one (callers also put deadlines on queries:
    # a query to a frozen server cannot be interrupted from the client).
    options: dict[str, object] = {
        "pool_size": 5,
        "max_overflow": 10,
        "pool_timeout": 10,
        "connect_args": {"connect_timeout": 5},
    }
    options.update(kwargs)
    engine = create_engine(u, **options)
    db_errors.install(engine)
    if "pool_pre_ping" not in kwargs:  # a caller's own choice stands (metadata/txn_engine.py)
        pool_ping.install(engine)
    return engine


def single_statements(engine: Engine) -> Engine:
    """`engine` (its pool, its events) in autocommit: each statement is a transaction of its
    own, with no BEGIN sent before it and no COMMIT or ROLLBACK after. For work of one
    statement, which is as atomic either way, and reads that need no snapshot in common: a
    duty polling Postgres every second pays one round trip instead of three (a read of the
    metadata version, measured: 0.56 -> 0.37 ms of the caller's CPU, 0.28 -> 0.10 ms of its
    Postgres backend's)."""
    return engine.execution_options(isolation_level="AUTOCOMMIT")


def _alembic_config() -> Config:
    # Alembic (~0.1 s of CPU to import) only where a process migrates: brokers and workers do,
    # fetch nodes, the console and client commands that only query do not.
    from alembic.config import Config

    cfg = Config()  # no alembic.ini: everything it would say is here
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def migrate(engine: Engine) -> None:
    """Upgrade the schema to head; several processes may call this at once.

    The whole upgrade is one transaction holding a transaction-level advisory lock: the
    first caller migrates, the others wait, then find alembic_version at head and do nothing.
    Postgres DDL is transactional, so a failure leaves the schema unchanged. A schema already
    at SCHEMA_HEAD (every start but the first after an upgrade) is left as it is, unlocked:
    a migration under way elsewhere is not committed, so its old revision is what we read.
    """
    if schema_revision(engine) == SCHEMA_HEAD:
        return
    from alembic import command
    from alembic.util import CommandError

    cfg = _alembic_config()
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATE_LOCK_KEY})
        cfg.attributes["connection"] = conn
        try:
            command.upgrade(cfg, "head")
        except CommandError as e:
            # Typically an older tierlog against a schema a newer one migrated: say so.
            raise RuntimeError(
                f"cannot migrate the metadata schema: {e}; is this database "
                "already at a newer tierlog version?"
            ) from e


def schema_revision(engine: Engine) -> str | None:
    """The applied Alembic revision, or None on an empty database."""
    with engine.connect() as conn:
        exists = conn.execute(text("SELECT to_regclass('alembic_version') IS NOT NULL")).scalar()
        if not exists:
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
