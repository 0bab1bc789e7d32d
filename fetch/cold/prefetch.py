"""Read-ahead for sequential replay, within a memory budget.

Every cold read registers a stream keyed by (partition, next offset): the position a
consumer asks for next. A read that arrives at a stream's position continues it, and each
continuation doubles its window (up to `window_bytes`), as a sequential file reader would.
After each read the stream makes sure the bytes of the next `window` are in memory or on
their way, concurrently:

- the rest of the current file in aligned runs of row groups of about `chunk_bytes` (one
  ranged GET each: few GETs per GB);
- the next files: a file up to `whole_file_bytes` in one GET of the whole object (its footer
  included, so a consumer crossing into it pays no GET at all), a bigger one footer first,
  then runs;
- the next row group decoded ahead on the pool, so it is ready when asked for.

All of it goes through the range cache, whose budget refuses a prefetch rather than evict
bytes that a reader has not used yet; the budget is what bounds memory, the window only how
far ahead one stream looks.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import NamedTuple

from cluster import node_settings as node
from fetch.cold.cold_caches import ColdCaches
from fetch.cold.cold_reader import Position
from fetch.cold.parquet_layout import FileLayout
from metadata.types import ColdFile, TopicIdPartition

log = logging.getLogger("tierlog.fetch.prefetch")


class StreamKey(NamedTuple):
    """A sequential reader, by where its next read starts."""

    tp: TopicIdPartition
    next_offset: int


class PrefetchConfig(NamedTuple):
    chunk_bytes: int = 16 << 20
    whole_file_bytes: int = 32 << 20
    window_bytes: int = node.COLD_PREFETCH_MB.default << 20  # cluster/node_settings.py
    files_ahead: int = 2
    max_streams: int = 1024


def runs(layout: FileLayout, chunk_bytes: int) -> list[tuple[int, int]]:
    """The file's row groups in consecutive runs of about `chunk_bytes`, as byte ranges.
    Deterministic per file, so concurrent readers of a file ask for the same ranges."""
    out: list[tuple[int, int]] = []
    start = None
    for g in layout.groups:
        if start is None:
            start = g.start
        if g.end - start >= chunk_bytes:
            out.append((start, g.end))
            start = None
    if start is not None:
        out.append((start, layout.groups[-1].end))
    return out


class Prefetcher:
    def __init__(self, caches: ColdCaches, config: PrefetchConfig | None = None) -> None:
        self._index, self._footers, self._ranges, self._groups = caches
        self.config = config or PrefetchConfig()
        self._streams: OrderedDict[StreamKey, int] = OrderedDict()  # → sequential hits
        self._tasks: set[asyncio.Task[None]] = set()

    def after_read(
        self,
        tp: TopicIdPartition,
        offset: int,
        next_offset: int,
        where: Position | None,
        rows: int = 0,
    ) -> None:
        """After a read of `rows` records that stopped at `where`: continue (or start) the
        stream at `next_offset` and read ahead of it."""
        hits = self._streams.pop(StreamKey(tp, offset), -1) + 1
        self._streams[StreamKey(tp, next_offset)] = hits
        while len(self._streams) > self.config.max_streams:
            self._streams.popitem(last=False)
        if where is None:
            return
        window = min(self.config.window_bytes, self.config.chunk_bytes << min(hits, 16))
        task = asyncio.create_task(self._ahead(tp, where, window, hits > 0, rows))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Only an optimisation: the reader will fetch on demand (and report errors).
            log.debug("prefetch failed", exc_info=task.exception())

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)

    async def _ahead(
        self, tp: TopicIdPartition, where: Position, window: int, sequential: bool, rows: int
    ) -> None:
        f, layout, g = where
        # Decode what the consumer's next request will want (as many rows as this one had),
        # while it is busy with this answer; the decoded cache's budget bounds it.
        ahead = 0
        for grp in layout.groups[g + 1 :]:
            if ahead >= max(rows, 1):
                break
            self._groups.prefetch(f.object_key, layout, grp.number)
            ahead += grp.rows
        left = window - self._file_ahead(f, layout, g + 1, window)
        if not sequential or left <= 0:
            return  # a first read only warms its own file: it may be a one-off
        current = f
        for _ in range(self.config.files_ahead):
            nxt = await self._next_file(tp, current)
            if nxt is None or left <= 0:
                return
            if nxt.size_bytes <= self.config.whole_file_bytes:
                if not self._ranges.prefetch(nxt.object_key, 0, nxt.size_bytes):
                    return
                left -= nxt.size_bytes
            else:
                nxt_layout = await self._footers.get(nxt.object_key, nxt.size_bytes)
                left -= self._file_ahead(nxt, nxt_layout, 0, left)
            current = nxt

    def _file_ahead(self, f: ColdFile, layout: FileLayout, first: int, budget: int) -> int:
        """Prefetch the runs of `f` from row group `first` on, up to `budget` bytes ahead;
        returns the bytes the file has from there (whether fetched now or before)."""
        if first >= len(layout.groups):
            return 0
        begin = layout.groups[first].start
        for start, end in runs(layout, self.config.chunk_bytes):
            if end <= begin:
                continue
            if start >= begin + budget:
                break
            if not self._ranges.prefetch(f.object_key, max(start, begin), end):
                break
        return layout.groups[-1].end - begin

    async def _next_file(self, tp: TopicIdPartition, f: ColdFile) -> ColdFile | None:
        known = self._index.peek_after(tp, f, 1)
        if known:
            return known[0]
        return await self._index.file_at(tp, f.last_offset + 1)
