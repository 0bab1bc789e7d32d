"""Alembic environment: migrations run on the connection metadata.db.migrate() passes in.

No alembic.ini and no logging setup: the caller owns both the connection (inside its
transaction, under its advisory lock) and the process's logging.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection


def run() -> None:
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError("run migrations through metadata.db.migrate(engine)")
    # transactional_ddl: Postgres DDL is transactional, so a failed upgrade leaves nothing.
    context.configure(connection=connection, target_metadata=None, transactional_ddl=True)
    with context.begin_transaction():
        context.run_migrations()


run()
