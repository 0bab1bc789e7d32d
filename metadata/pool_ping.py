"""Pinging a pooled connection before use, only when it has sat idle a while.

SQLAlchemy's `pool_pre_ping` sends a round trip before every checkout. A broker's duties each
check a connection out every 0.5-1 s for a statement or two, so that doubled the round trips
of an idle broker (~10% of its CPU in a py-spy profile, and as much again in its Postgres
backends). A connection checked in moments ago worked moments ago; what pre-ping is for is one
that sat in the pool across a Postgres restart (`tierlog dev`) or an idle timeout, and such a
connection has been idle at least as long as the outage. So only a connection idle for
`IDLE_PING_S` is pinged (with the dialect's own ping), and one that fails its ping is replaced
before the caller sees it, as with pre-ping (SQLAlchemy's pessimistic disconnect recipe).

A connection that died within its last `IDLE_PING_S` of use fails its first statement instead:
a disconnect, so SQLAlchemy invalidates the whole pool and the caller gets
`PostgresUnavailable` (retriable, metadata/db_errors.py), as for any statement cut off by an
outage.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DisconnectionError

IDLE_PING_S = 1.0
_CHECKED_IN = "tierlog_checked_in_at"


def install(engine: Engine) -> None:
    """Ping `engine`'s pooled connections on checkout once idle for IDLE_PING_S (the engine
    is made without `pool_pre_ping`)."""
    window = IDLE_PING_S  # read now: a test shortens it before making its engine
    dialect = engine.dialect
    dbapi_error = dialect.loaded_dbapi.Error

    @event.listens_for(engine, "checkin")
    def _checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info[_CHECKED_IN] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.get(_CHECKED_IN)
        if since is None or time.monotonic() - since < window:
            return  # new (just connected), or in use moments ago
        try:
            dialect.do_ping(dbapi_connection)
        except dbapi_error as exc:
            # The pool discards this connection and checks out another (a new one if need be).
            raise DisconnectionError(f"pooled connection failed its ping: {exc}") from exc
