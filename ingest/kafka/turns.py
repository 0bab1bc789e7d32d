"""A connection's requests take turns: each starts once the one before it has finished, or
has let it start early.

Kafka answers a connection's requests in order and, by processing them one at a time, keeps
their effects in order too. The listener reads ahead (clients pipeline requests) and
answers in order; this keeps the effects ordered. A handler whose remaining work is only
waiting lets the next request start: produce, once its records are queued for the log in
order (Partition.submit), waits for the write and the replicas concurrently with the next
produce, which is what lets pipelined produce requests share group commits and replica
fetches instead of paying a replication round trip each.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

# The turn of the request the running task serves (set in the request's own task: handlers
# and the tasks they spawn see their request's turn, never another's).
_CURRENT: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "kafka_request_turn", default=None
)


class Turns:
    def __init__(self) -> None:
        self._lock = asyncio.Lock()  # FIFO: requests start in the order they were read
        self._held: object | None = None

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for this request's turn; it ends when the block does, unless let go before."""
        token = object()
        await self._lock.acquire()
        self._held = token
        _CURRENT.set(token)
        try:
            yield
        finally:
            self._give(token)

    def let_next_start(self) -> None:
        """Called by a handler: the connection's next request may start now."""
        token = _CURRENT.get()
        if token is not None:
            self._give(token)

    def _give(self, token: object) -> None:
        if self._held is token:
            self._held = None
            self._lock.release()
