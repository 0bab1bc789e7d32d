"""Databases for benches: more than one cluster on one Postgres, or a benchmark's whole run on a
server someone else runs."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.engine import make_url

from metadata.db import make_engine


def new_database(url: str, name: str) -> str:
    """Create a database named after `name` (a suffix keeps it apart from others' on a shared
    server) on the server of `url`; returns its URL."""
    unique = f"{name}_{uuid.uuid4().hex[:8]}"
    admin = make_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{unique}"'))
    admin.dispose()
    return make_url(url).set(database=unique).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    """Drop the database of `url`, connections and all (from the server's default database)."""
    parsed = make_url(url)
    admin = make_engine(
        parsed.set(database="postgres").render_as_string(hide_password=False),
        isolation_level="AUTOCOMMIT",
    )
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)'))
    admin.dispose()
