"""Parquet footers (FileMetaData and the row-group layout derived from it), in an LRU.

A footer costs one ranged GET of the file's tail (TAIL_GUESS bytes; a second GET only for a
footer bigger than that), or none when the prefetcher already holds the whole file. Cold
files are immutable (a new upload is a new key), so a cached footer never goes stale.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from concurrent.futures import Executor

from fetch.cold import metrics
from fetch.cold.parquet_layout import TAIL_GUESS, FileLayout, footer_length, parse_footer
from fetch.cold.range_cache import RangeCache, join_range


class FooterCache:
    def __init__(self, ranges: RangeCache, pool: Executor, max_entries: int = 4096) -> None:
        self._ranges, self._pool = ranges, pool
        self.max_entries = max_entries
        self._entries: OrderedDict[str, asyncio.Future[FileLayout]] = OrderedDict()

    def cached(self, key: str) -> FileLayout | None:
        f = self._entries.get(key)
        return f.result() if f is not None and f.done() and not f.exception() else None

    async def get(self, key: str, size: int) -> FileLayout:
        future = self._entries.get(key)
        if future is not None:
            metrics.CACHE_HITS.labels("footer").inc()
            self._entries.move_to_end(key)
        else:
            metrics.CACHE_MISSES.labels("footer").inc()
            future = asyncio.ensure_future(self._load(key, size))
            self._entries[key] = future
            future.add_done_callback(lambda f: self._loaded(key, f))
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return await asyncio.shield(future)

    def _loaded(self, key: str, future: asyncio.Future[FileLayout]) -> None:
        failed = future.cancelled() or future.exception() is not None
        if failed and self._entries.get(key) is future:
            del self._entries[key]  # a failed read is retried by the next reader

    async def _load(self, key: str, size: int) -> FileLayout:
        start = max(0, size - TAIL_GUESS)
        tail = join_range(await self._ranges.read(key, start, size, "footer"), start, size)
        needed = footer_length(tail) + 8
        if needed > len(tail) and needed <= size:
            head = await self._ranges.read(key, size - needed, start, "footer")
            tail = join_range(head, size - needed, start) + tail
        self._ranges.consume(key, size)  # the tail's bytes are no longer needed (just parsed)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, parse_footer, tail, size)
