"""The Kafka listener's budget of request bytes in flight (Kafka's queued.max.request.bytes).

Sized by the broker's --max-inflight-bytes, apart from the HTTP listener's budget: a request
reserves its declared size before its body is read and holds it until it is answered. One
that finds no room within a second closes its connection (the client reconnects and
retries), so a flood of large requests cannot grow the broker's memory without bound.
"""

from __future__ import annotations

import asyncio


class RequestBudget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._freed = asyncio.Condition()

    def _fits(self, n: int) -> bool:
        # A request bigger than the whole budget still runs alone (the frame size limit
        # bounds it), so a small budget cannot starve it forever.
        return self.used == 0 or self.used + n <= self.limit

    async def acquire(self, n: int, wait_s: float) -> bool:
        """Reserve `n` bytes, waiting up to `wait_s` for room; False: still none."""
        if not self._fits(n):
            try:
                async with asyncio.timeout(wait_s), self._freed:
                    await self._freed.wait_for(lambda: self._fits(n))
            except TimeoutError:
                return False
        self.used += n
        return True

    async def release(self, n: int) -> None:
        self.used = max(0, self.used - n)
        async with self._freed:
            self._freed.notify_all()
