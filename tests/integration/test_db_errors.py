"""The SQLAlchemy adapter (metadata/db_errors.py): what Postgres and the driver raise leaves
an engine made by make_engine as a failures/ family, against a real server."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import exc as sa
from sqlalchemy import text
from sqlalchemy.engine import Engine

from failures.classify import family, is_retriable
from failures.families import Family
from metadata.db import make_engine
from metadata.db_errors import (
    FOREIGN_KEY_VIOLATION,
    UNIQUE_VIOLATION,
    ConstraintViolation,
    PostgresUnavailable,
)
from metadata.topics import TopicRepo


def test_a_duplicate_is_an_invalid_request_naming_its_constraint(db_engine: Engine) -> None:
    with pytest.raises(ConstraintViolation) as caught, db_engine.begin() as conn:
        conn.execute(text("INSERT INTO metadata_version (id, version) VALUES (1, 0)"))
    err = caught.value
    assert err.sqlstate == UNIQUE_VIOLATION and err.constraint
    assert family(err) is Family.INVALID_REQUEST and not is_retriable(err)
    assert isinstance(err.__cause__, psycopg.errors.UniqueViolation)  # the driver's own


def test_a_missing_parent_row_is_a_foreign_key_violation(db_engine: Engine) -> None:
    with pytest.raises(ConstraintViolation) as caught, db_engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO hot_segments (topic_id, partition, base_offset, end_offset,"
                " size_bytes) VALUES (gen_random_uuid(), 0, 0, 1, 1)"
            )
        )
    assert caught.value.sqlstate == FOREIGN_KEY_VIOLATION


def test_a_server_that_is_not_there_is_unavailable() -> None:
    engine = make_engine("postgresql://tierlog@127.0.0.1:1/none", connect_args={})
    try:
        with pytest.raises(PostgresUnavailable) as caught, engine.connect():
            pass
    finally:
        engine.dispose()
    assert caught.value.dependency == "Postgres"
    assert family(caught.value) is Family.UNAVAILABLE and is_retriable(caught.value)


def test_a_statement_timeout_is_unavailable_and_the_engine_goes_on(db_engine: Engine) -> None:
    with pytest.raises(PostgresUnavailable), db_engine.connect() as conn:
        conn.execute(text("SET statement_timeout = 10"))
        conn.execute(text("SELECT pg_sleep(5)"))
    with db_engine.connect() as conn:
        assert conn.execute(text("SELECT 1")).scalar() == 1


def test_a_killed_connection_is_unavailable_then_replaced(db_engine: Engine) -> None:
    with db_engine.connect() as conn:
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        with db_engine.connect() as other:
            other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        with pytest.raises(PostgresUnavailable):
            conn.execute(text("SELECT 1"))
    with db_engine.connect() as conn:  # the dead connection was invalidated, not reused
        assert conn.execute(text("SELECT pg_backend_pid()")).scalar() != pid


def test_a_bug_stays_sqlalchemys_error(db_engine: Engine) -> None:
    with pytest.raises(sa.ProgrammingError), db_engine.connect() as conn:
        conn.execute(text("SELECT no_such_column FROM topics"))
    assert TopicRepo(db_engine).list() == []  # the engine still answers
