"""Databases for benches that run more than one cluster on one Postgres."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import make_url

from metadata.db import make_engine


def new_database(url: str, name: str) -> str:
    """Create database `name` on the server of `url`; returns its URL."""
    admin = make_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(url).set(database=name).render_as_string(hide_password=False)
