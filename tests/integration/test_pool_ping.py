"""Pinging pooled connections only once idle (metadata/pool_ping.py), against a real server:
one idle past the window that died (here: its backend terminated, as a Postgres restart does)
is replaced before the caller sees it; one used moments ago is not pinged; one that died
within the window fails its statement as PostgresUnavailable and the pool recovers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from metadata.db import make_engine
from metadata.db_errors import PostgresUnavailable

IDLE_S = 0.3  # the window these engines are made with


@pytest.fixture
def engine(fresh_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    monkeypatch.setattr("metadata.pool_ping.IDLE_PING_S", IDLE_S)
    e = make_engine(fresh_db, pool_size=1, max_overflow=0)
    yield e
    e.dispose()


def _pid(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _terminate(fresh_db: str, pid: int) -> None:
    other = make_engine(fresh_db, pool_size=1)
    with other.connect() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar_one()
    other.dispose()


def test_a_connection_that_died_while_idle_is_replaced_unseen(
    engine: Engine, fresh_db: str
) -> None:
    before = _pid(engine)
    _terminate(fresh_db, before)
    time.sleep(IDLE_S * 2)
    after = _pid(engine)  # no error: the ping found it dead, the pool connected anew
    assert after != before


def test_a_connection_in_use_moments_ago_is_not_pinged(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    pings: list[object] = []
    ping = engine.dialect.do_ping

    def counted(dbapi_connection: Any) -> bool:
        pings.append(dbapi_connection)
        return ping(dbapi_connection)

    monkeypatch.setattr(engine.dialect, "do_ping", counted)
    _pid(engine)  # a new connection: not pinged
    _pid(engine)  # checked in a moment ago: not pinged
    assert pings == []
    time.sleep(IDLE_S * 2)
    _pid(engine)
    assert len(pings) == 1


def test_one_that_died_within_the_window_fails_once_as_unavailable(
    fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A window far longer than terminating the backend takes (another connection's start-up
    # included): on a loaded machine that once outlasted 0.3 s, and the ping then hid the death.
    monkeypatch.setattr("metadata.pool_ping.IDLE_PING_S", 30.0)
    engine = make_engine(fresh_db, pool_size=1, max_overflow=0)
    try:
        before = _pid(engine)
        _terminate(fresh_db, before)  # within the window: its last use was moments ago
        with pytest.raises(PostgresUnavailable):
            _pid(engine)
        assert _pid(engine) != before  # the pool was invalidated: the next caller is fine
    finally:
        engine.dispose()
