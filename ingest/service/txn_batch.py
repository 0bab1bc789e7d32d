"""Postgres calls of the transaction path gathered into one (a group commit): the span
changes and the producer checks every partition of a produce request or an EndTxn asks for
at once would otherwise cost a thread hop and a round trip each (docs/kafka-apis.md,
Transactions).

A call waits for the next run: the items that arrived while no run was under way go
together, in one call of `run` on a worker thread. An item never joins a run that already
started, so what a run reads was read after each of its callers asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Batched(Generic[Item, Result]):
    """`await batched(item)`: `run(items)` (blocking, one result per item in order) on a
    worker thread, for every item that arrived before the run began."""

    def __init__(
        self,
        run: Callable[[list[Item]], Sequence[Result]],
        before: Callable[[list[Item]], list[Item]] | None = None,
    ) -> None:
        """`before(items)`, if given, runs on the event loop as each run begins: the items
        as `run` is to take them (the same number, in order)."""
        self._run = run
        self._before = before
        self._waiting: list[tuple[Item, asyncio.Future[Result]]] = []
        self._running: list[tuple[Item, asyncio.Future[Result]]] = []
        self._runner: asyncio.Task[None] | None = None

    async def __call__(self, item: Item) -> Result:
        return await self.submit(item)

    def submit(self, item: Item) -> asyncio.Future[Result]:
        """The item queued now (for this run or the next: never one that began before an
        item submitted earlier), its result to await."""
        done: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, done))
        if self._runner is None:
            self._runner = asyncio.create_task(self._drain(), name="txn-batch")
        return done

    async def _drain(self) -> None:
        try:
            while self._waiting:
                self._running, self._waiting = self._waiting, []
                try:
                    items = [item for item, _ in self._running]
                    if self._before is not None:
                        items = self._before(items)
                    results = await asyncio.to_thread(self._run, items)
                except Exception as exc:  # every caller of the run hears of it
                    for _, done in self._running:
                        if not done.done():
                            done.set_exception(exc)
                    continue
                for (_, done), result in zip(self._running, results, strict=True):
                    if not done.done():
                        done.set_result(result)
        finally:  # cancelled (the broker stopping): no caller waits forever
            for _, done in self._running + self._waiting:
                done.cancel()
            self._running, self._waiting, self._runner = [], [], None
