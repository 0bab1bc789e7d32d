"""The Kafka listener's budgets of request bytes in flight (Kafka's queued.max.request.bytes).

The main budget is sized by the broker's --max-inflight-bytes, apart from the HTTP listener's
budget: an authenticated connection's request reserves its declared size before its body is
read and holds it until it is answered. Frames read before authentication reserve from a
small budget of their own (listener.py), so a client that has not proved who it is cannot
take room from those that have. One that finds no room within a second closes its
connection (the client reconnects and retries), so a flood of large requests cannot grow the
broker's memory without bound.

Each reservation is released exactly once (`Reservation.release` is idempotent) and a
release of more than is held is a bug, raised, not clamped: an earlier version clamped at
zero and released from inside the request's task, so a request whose task was cancelled
before it first ran (read ahead, then its connection closed) never gave its bytes back and
the count crept up for good on a long-running broker.
"""

from __future__ import annotations

import asyncio


class Reservation:
    """Bytes held in a budget until released; releasing twice gives them back once."""

    __slots__ = ("_budget", "size")

    def __init__(self, budget: RequestBudget, size: int) -> None:
        self._budget: RequestBudget | None = budget
        self.size = size

    def release(self) -> None:
        budget, self._budget = self._budget, None
        if budget is not None:
            budget.give_back(self.size)


class RequestBudget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.held = 0  # reservations outstanding: with `used`, what tests check returns to 0
        self._freed = asyncio.Event()

    def _fits(self, n: int) -> bool:
        # A request bigger than the whole budget still runs alone (the frame size limit
        # bounds it), so a small budget cannot starve it forever.
        return self.used == 0 or self.used + n <= self.limit

    async def acquire(self, n: int, wait_s: float) -> Reservation | None:
        """Reserve `n` bytes, waiting up to `wait_s` for room; None: still none."""
        try:
            async with asyncio.timeout(wait_s):
                while not self._fits(n):
                    freed = self._freed
                    await freed.wait()
        except TimeoutError:
            return None
        self.used += n
        self.held += 1
        return Reservation(self, n)

    def give_back(self, n: int) -> None:
        if n > self.used or self.held <= 0:
            raise RuntimeError(f"budget released {n} bytes but holds {self.used}")
        self.used -= n
        self.held -= 1
        # Wake every waiter (each rechecks whether it fits); later ones wait on a new event.
        self._freed.set()
        self._freed = asyncio.Event()
