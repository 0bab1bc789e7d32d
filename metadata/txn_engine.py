"""The transaction path's statements on connections checked out without a pre-ping.

make_engine's pool pings a connection it hands out once it has sat idle over a second (a
round trip before the statement: "pessimistic" disconnect handling, for a Postgres restarted
under a running process; metadata/pool_ping.py). Each step every Kafka transaction takes is
one statement (metadata/transactions.py), and a producer pausing between transactions would
pay that round trip on its next step. Here they take SQLAlchemy's "optimistic" handling
instead: a sibling engine on the same database whose pool does not ping, and a statement
that meets a dead connection (SQLAlchemy invalidates it, and with it the pool's older ones)
runs once more on a new one. Every statement run so is safe to run twice: a conditional
UPDATE that finds its condition gone leaves the caller to its locked path (which answers a
retry), and span writes are upserts.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from metadata.db import make_engine
from metadata.db_errors import POSTGRES_DOWN

T = TypeVar("T")
APPLICATION_NAME = "tierlog-txn"  # its connections in pg_stat_activity

_UNPINGED: weakref.WeakKeyDictionary[Engine, Engine] = weakref.WeakKeyDictionary()
_MAKING = threading.Lock()


def unpinged(engine: Engine) -> Engine:
    """The sibling of `engine` without a pre-ping (one per engine, disposed with it)."""
    found = _UNPINGED.get(engine)
    if found is not None:
        return found
    with _MAKING:  # the transaction path's worker threads ask at once on first use
        found = _UNPINGED.get(engine)
        if found is None:
            # A small pool: a broker's transaction path runs a few statements at once (its
            # batched span writes and producer checks, the coordinator's steps).
            made = make_engine(
                engine.url.render_as_string(hide_password=False),
                pool_pre_ping=False,
                pool_size=3,
                max_overflow=6,
                connect_args={"connect_timeout": 5, "application_name": APPLICATION_NAME},
            )
            event.listen(engine, "engine_disposed", lambda _: made.dispose())
            found = _UNPINGED[engine] = made
    return found


def autocommitted(engine: Engine, work: Callable[[Connection], T]) -> T:
    """`work` on a connection of `engine` (unpinged) whose statements commit each on its
    own, run once more if its connection turned out dead (a Postgres restart, a terminated
    backend): the second connection is a new one. Any other error is the caller's."""
    for attempt in (1, 2):
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            try:
                return work(conn)
            except POSTGRES_DOWN:
                if attempt == 2 or not conn.invalidated:
                    raise
    raise AssertionError("unreachable")
