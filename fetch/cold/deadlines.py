"""Deadlines on what a cold read waits for, each named for the dependency that missed it.

A frozen Postgres or S3 accepts connections and then never answers: socket timeouts and
retries (botocore's read timeout x attempts) add up to minutes, and a query on a thread
cannot be interrupted at all. The caller stops waiting here instead, with a retriable 503
REQUEST_TIMED_OUT that says which dependency did not answer (`dependency` in the JSON).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from fetch.cold import metrics
from fetch.cold.store import RangeStore
from logformat.errors import ErrorCode, TierlogError

log = logging.getLogger("tierlog.fetch.deadlines")
T = TypeVar("T")
POSTGRES = "postgres"
S3 = "s3"
_WHAT = {POSTGRES: "Postgres (the cold-tier manifest)", S3: "S3 (the cold tier's object store)"}


def dependency_timeout(dependency: str, seconds: float) -> TierlogError:
    metrics.DEPENDENCY_TIMEOUTS.labels(dependency).inc()
    return TierlogError(
        ErrorCode.REQUEST_TIMED_OUT,
        f"{_WHAT.get(dependency, dependency)} did not answer within {seconds:g} s; retry later",
        dependency=dependency,
    )


async def within(seconds: float, dependency: str, aw: Awaitable[T]) -> T:
    """`aw`, or REQUEST_TIMED_OUT naming `dependency` after `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            return await aw
    except TimeoutError:
        log.warning("%s did not answer within %s s", dependency, seconds)
        raise dependency_timeout(dependency, seconds) from None


class DeadlineStore:
    """A RangeStore whose every GET has a deadline (prefetches included)."""

    def __init__(self, store: RangeStore, timeout_s: float) -> None:
        self._store = store
        self.timeout_s = timeout_s

    async def open(self) -> None:
        await self._store.open()  # makes a client; asks S3 nothing

    async def close(self) -> None:
        await self._store.close()

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        return await within(self.timeout_s, S3, self._store.get_range(key, start, end))
