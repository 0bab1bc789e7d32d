"""What a broker's duties poll every second or so runs as a statement of its own (autocommit,
metadata/db.py `single_statements`): one round trip, no BEGIN before it and no COMMIT or
ROLLBACK after. And the autocommit stays with the poll: the pooled connection it used runs the
next caller's `engine.begin()` as one transaction again."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from psycopg.pq import TransactionStatus
from sqlalchemy import event, text
from sqlalchemy.engine import Engine

from metadata.brokers import BrokerRepo
from metadata.controller_lease import ControllerLease
from metadata.db import make_engine
from metadata.erasures import ErasureRepo
from metadata.groups import GroupRepo
from metadata.topics import TopicRepo
from metadata.transactions import TxnRepo


@pytest.fixture
def engine(fresh_db: str) -> Iterator[Engine]:
    e = make_engine(fresh_db, pool_size=1, max_overflow=0)  # every caller shares one connection
    yield e
    e.dispose()


def _statuses(engine: Engine) -> list[TransactionStatus]:
    """The connection's transaction status after each statement `engine` runs from now on:
    INTRANS inside a transaction (a BEGIN went first), IDLE when the statement committed."""
    seen: list[TransactionStatus] = []

    @event.listens_for(engine, "after_cursor_execute")
    def _after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(TransactionStatus(conn.connection.dbapi_connection.info.transaction_status))

    return seen


def test_each_polled_statement_is_a_transaction_of_its_own(engine: Engine) -> None:
    brokers, lease = BrokerRepo(engine), ControllerLease(engine)
    brokers.register(1, "http://127.0.0.1:1", lease_ms=10_000)
    polls: dict[str, Callable[[], object]] = {
        "broker heartbeat": lambda: brokers.heartbeat(1, 10_000),
        "broker list": brokers.list,
        "live brokers": brokers.live_ids,
        "controller lease": lambda: lease.try_acquire(1, 10_000),
        "controller lapse": lease.lapses_in_s,
        "controller holder": lease.holder,
        "metadata version": TopicRepo(engine).version,
        "open erasures": ErasureRepo(engine).count_open,
        "lapsed group sessions": GroupRepo(engine).lapsed,
        "due transactions": lambda: TxnRepo(engine).due(timedelta(seconds=30)),
    }
    seen = _statuses(engine)
    for name, poll in polls.items():
        seen.clear()
        poll()
        assert seen == [TransactionStatus.IDLE], f"{name}: {seen}"


def test_a_transaction_after_a_poll_on_the_same_connection_is_one(engine: Engine) -> None:
    brokers = BrokerRepo(engine)
    brokers.register(1, "http://127.0.0.1:1", lease_ms=10_000)
    assert brokers.heartbeat(1, 10_000)
    seen = _statuses(engine)
    with engine.begin() as conn:
        conn.execute(text("SELECT 1"))
        conn.execute(text("SELECT 2"))
    assert seen == [TransactionStatus.INTRANS, TransactionStatus.INTRANS]
