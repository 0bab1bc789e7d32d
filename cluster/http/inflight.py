"""Broker-wide budgets for work in flight: request body bytes (Kafka's
`queued.max.request.bytes`) and long-polling fetches.

A request that does not fit waits a little for others to finish, then is refused: a flood of
large requests meets backpressure instead of growing the broker's memory without bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from cluster import metrics


class ByteBudget:
    """Bytes reserved by requests being read: a request's declared size at admission, a
    chunked body's bytes as they arrive."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._freed = asyncio.Condition()

    def fits(self, n: int, held: int = 0) -> bool:
        # A request larger than the whole budget still runs alone (max_request_bytes bounds
        # it), so a budget below the request limit cannot starve it forever. `held`: what the
        # asking request holds already (its body, when it asks for its decoded size).
        return n <= 0 or self.used <= held or self.used + n <= self.limit

    def try_acquire(self, n: int, held: int = 0) -> bool:
        if not self.fits(n, held):
            return False
        self.used += n
        metrics.INFLIGHT_BYTES.set(self.used)
        return True

    async def acquire(self, n: int, wait_s: float, held: int = 0) -> bool:
        """Take `n` bytes, waiting up to `wait_s` for room; False: still no room."""
        return await self._wait(lambda: self.try_acquire(n, held), wait_s)

    async def _wait(self, ready: Callable[[], bool], wait_s: float) -> bool:
        if ready():
            return True
        try:
            async with asyncio.timeout(wait_s):
                async with self._freed:
                    await self._freed.wait_for(ready)
        except TimeoutError:
            return False
        return True

    def release(self, n: int) -> None:
        if n <= 0:
            return
        self.used = max(0, self.used - n)
        metrics.INFLIGHT_BYTES.set(self.used)
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._freed:
            self._freed.notify_all()


class SlotCounter:
    """At most `limit` holders at once (long polls); no waiting: a poll can come back later."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def try_take(self) -> bool:
        if self.used >= self.limit:
            return False
        self.used += 1
        metrics.LONG_POLLS.set(self.used)
        return True

    def give_back(self) -> None:
        self.used = max(0, self.used - 1)
        metrics.LONG_POLLS.set(self.used)
