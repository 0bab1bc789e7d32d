"""Decoded row groups in an LRU bounded in bytes, decoded in a bounded thread pool.

A sequential consumer asks for a few hundred records at a time from row groups of tens of
thousands: without this cache every request would decode its whole row group again. Decoding
(zstd + Parquet → Arrow) runs on the pool, never on the event loop; one decode per row group
however many readers want it (single flight).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from concurrent.futures import Executor
from typing import NamedTuple

import pyarrow as pa

from fetch.cold import metrics
from fetch.cold.parquet_layout import FileLayout, decode_group
from fetch.cold.range_cache import RangeCache


class GroupKey(NamedTuple):
    object_key: str
    group: int  # the row group's index in the file


class RowGroupCache:
    def __init__(self, ranges: RangeCache, pool: Executor, capacity: int) -> None:
        self._ranges, self._pool = ranges, pool
        self.capacity = capacity
        self.used = 0
        self._entries: OrderedDict[GroupKey, asyncio.Future[pa.Table]] = OrderedDict()
        self._sizes: dict[GroupKey, int] = {}

    async def get(self, key: str, layout: FileLayout, group: int) -> pa.Table:
        k = GroupKey(key, group)
        future = self._entries.get(k)
        if future is not None:
            metrics.CACHE_HITS.labels("row_group").inc()
            self._entries.move_to_end(k)
        else:
            metrics.CACHE_MISSES.labels("row_group").inc()
            future = self._start(k, layout)
        return await asyncio.shield(future)

    def has(self, key: str, group: int) -> bool:
        return GroupKey(key, group) in self._entries

    def prefetch(self, key: str, layout: FileLayout, group: int) -> None:
        """Decode ahead if there is room without evicting anything not yet read."""
        k = GroupKey(key, group)
        if k in self._entries or self.used + layout.groups[group].nbytes > self.capacity:
            return
        self._start(k, layout)

    def consume(self, key: str, group: int) -> None:
        """A sequential reader is done with this row group: evict it first."""
        k = GroupKey(key, group)
        if k in self._entries:
            self._entries.move_to_end(k, last=False)

    def _start(self, k: GroupKey, layout: FileLayout) -> asyncio.Future[pa.Table]:
        future = asyncio.ensure_future(self._load(k, layout))
        self._entries[k] = future
        future.add_done_callback(lambda f: self._loaded(k, f))
        return future

    async def _load(self, k: GroupKey, layout: FileLayout) -> pa.Table:
        key, group = k
        g = layout.groups[group]
        pieces = await self._ranges.read(key, g.start, g.end)
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        table = await loop.run_in_executor(self._pool, decode_group, layout, pieces, group)
        metrics.DECODE_SECONDS.observe(time.perf_counter() - started)
        # Its raw bytes are no longer needed (the last group's: nor the footer's after it).
        self._ranges.consume(key, layout.size if group == len(layout.groups) - 1 else g.end)
        return table

    def _loaded(self, k: GroupKey, future: asyncio.Future[pa.Table]) -> None:
        if self._entries.get(k) is not future:
            return
        if future.cancelled() or future.exception() is not None:
            del self._entries[k]  # retried by the next reader
            return
        size = future.result().nbytes
        self._sizes[k] = size
        self.used += size
        for old in list(self._entries):
            if self.used <= self.capacity:
                break
            if old == k or not self._entries[old].done():
                continue
            del self._entries[old]
            self.used -= self._sizes.pop(old, 0)
        metrics.CACHE_BYTES.labels("row_group").set(self.used)
