"""Offset → cold file, through the Postgres manifest (docs/design.md §4: "Fetch resolves an offset
through it"), never by listing the bucket.

Every lookup is an index probe on cold_files (topic_id, partition, base_offset) restricted to
committed rows (the partial index of migration v0005 keeps deleted rows out of the way), so
resolving an offset costs the same with 10 or 10 million cold files:

    covering:  base_offset <= o  ORDER BY base_offset DESC LIMIT 1
    next:      base_offset >  o  ORDER BY base_offset       LIMIT k   (read-ahead window)
    bounds:    ORDER BY base_offset LIMIT 1, and DESC LIMIT 1

A short window of consecutive files is cached per partition, so a sequential replay asks
Postgres once per `window` files. An erasure's cold rewrite must reach readers at once, so a
window is trusted only while the owner's NOTIFY listener holds (`listening`), and
`invalidate_all` (its callback) makes every window read before it unusable
(metadata/erasures.py's COLD_SETTLE_MS says why `done` may then follow within seconds).

Queries run on a small pool of their own, so a burst of cold reads can never starve the
broker's heartbeat (which uses the default executor).
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from cluster.read_contract import ColdRange
from fetch.cold import metrics
from fetch.cold.deadlines import POSTGRES, within
from metadata.cold_file_rows import cold_file
from metadata.erasures import READER_FILE_LIST_TTL_S
from metadata.log_starts import log_start_of
from metadata.schema import cold_files, of_partition
from metadata.types import ColdFile, TopicIdPartition

_COLS = list(cold_files.columns)
_C = cold_files.c


def _where(tp: TopicIdPartition) -> tuple[Any, ...]:
    return (of_partition(cold_files, tp), _C.state == "committed")


class ManifestQueries:
    """The synchronous queries (run on the index's pool)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def bounds(self, tp: TopicIdPartition) -> ColdRange | None:
        """[first committed offset, last + 1), starting no lower than the log start
        DeleteRecords set (metadata/log_starts.py); None when nothing committed is at or
        above it (the hot log holds the log start then)."""
        w = _where(tp)
        first = select(_C.base_offset).where(*w).order_by(_C.base_offset).limit(1)
        last = select(_C.last_offset).where(*w).order_by(_C.base_offset.desc()).limit(1)
        metrics.MANIFEST_QUERIES.labels("bounds").inc()
        with self.engine.connect() as conn:
            row = conn.execute(
                select(first.scalar_subquery(), last.scalar_subquery(), log_start_of(tp))
            ).one()
        if row[0] is None:
            return None
        start, end = max(int(row[0]), int(row[2] or 0)), int(row[1]) + 1
        return ColdRange(start, end) if start < end else None

    def window(self, tp: TopicIdPartition, offset: int, ahead: int) -> list[ColdFile]:
        """The file whose base is the last <= `offset` (if any) and the `ahead` after it."""
        w = _where(tp)
        covering = (
            select(*_COLS).where(*w, _C.base_offset <= offset).order_by(_C.base_offset.desc())
        )
        after = select(*_COLS).where(*w, _C.base_offset > offset).order_by(_C.base_offset)
        metrics.MANIFEST_QUERIES.labels("window").inc()
        with self.engine.connect() as conn:
            rows = list(conn.execute(covering.limit(1)))
            rows += list(conn.execute(after.limit(ahead)))
        return [cold_file(r) for r in rows]

    def first_reaching(self, tp: TopicIdPartition, timestamp: int) -> ColdFile | None:
        """The first file in offset order holding a timestamp >= `timestamp`.

        A scan in offset order filtered on max_timestamp: producers choose timestamps, so they
        need not grow with offsets and no index orders files by "first reaching" a time. It
        stops at the first match, so its cost is the number of files before the answer."""
        stmt = (
            select(*_COLS)
            .where(*_where(tp), _C.max_timestamp >= timestamp)
            .order_by(_C.base_offset)
            .limit(1)
        )
        metrics.MANIFEST_QUERIES.labels("timestamp").inc()
        with self.engine.connect() as conn:
            row = conn.execute(stmt).first()
        return None if row is None else cold_file(row)

    def search_files(
        self, tp: TopicIdPartition, start: int, end: int, min_ts: int | None, max_ts: int | None
    ) -> tuple[list[ColdFile], int, int]:
        """The files that may hold offsets in [start, end) and timestamps in [min_ts, max_ts)
        (by their manifest ranges), in offset order; and the count and bytes of all files."""
        conds = [*_where(tp), _C.last_offset >= start, _C.base_offset < end]
        if min_ts is not None:
            conds.append(_C.max_timestamp >= min_ts)
        if max_ts is not None:
            conds.append(_C.min_timestamp < max_ts)
        totals = select(func.count(), func.coalesce(func.sum(_C.size_bytes), 0)).where(*_where(tp))
        metrics.MANIFEST_QUERIES.labels("search").inc()
        with self.engine.connect() as conn:
            rows = conn.execute(select(*_COLS).where(*conds).order_by(_C.base_offset)).all()
            count, size = conn.execute(totals).one()
        return [cold_file(r) for r in rows], int(count), int(size)


class _Window:
    __slots__ = ("at", "bases", "epoch", "files")

    def __init__(self, files: list[ColdFile], epoch: int = 0) -> None:
        self.files = files
        self.bases = [f.base_offset for f in files]
        self.at = time.monotonic()
        self.epoch = epoch  # ColdIndex._epoch when its query began


class ColdIndex:
    """Async, cached manifest lookups."""

    def __init__(
        self,
        queries: ManifestQueries,
        pool: Executor,
        *,
        bounds_ttl_s: float = 1.0,
        window_ttl_s: float = READER_FILE_LIST_TTL_S,
        window: int = 8,
        max_partitions: int = 4096,
        query_timeout_s: float = 5.0,
        listening: Callable[[], bool] = lambda: True,
    ) -> None:
        self._q, self._pool = queries, pool
        self._listening = listening
        self._epoch = 0  # bumped by invalidate_all (any thread; only the listener writes it)
        self.query_timeout_s = query_timeout_s
        self.bounds_ttl_s, self.window_ttl_s, self.window = bounds_ttl_s, window_ttl_s, window
        self.max_partitions = max_partitions
        self._bounds: OrderedDict[TopicIdPartition, tuple[float, ColdRange | None]] = OrderedDict()
        self._windows: OrderedDict[TopicIdPartition, _Window] = OrderedDict()

    async def _run(self, fn: Any, *args: Any) -> Any:
        # The thread may stay stuck on a frozen Postgres; the caller stops waiting for it.
        ran = asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        return await within(self.query_timeout_s, POSTGRES, ran)

    def peek_bounds(self, tp: TopicIdPartition) -> tuple[ColdRange | None] | None:
        """The cached bounds if fresh, wrapped (None: not cached). Reads only, so any thread
        may call it."""
        hit = self._bounds.get(tp)
        if hit is not None and time.monotonic() - hit[0] < self.bounds_ttl_s:
            return (hit[1],)
        return None

    def last_bounds(self, tp: TopicIdPartition) -> tuple[float, ColdRange | None] | None:
        """The last bounds read, however old, with their age in seconds (None: never read)."""
        hit = self._bounds.get(tp)
        return None if hit is None else (time.monotonic() - hit[0], hit[1])

    async def bounds(self, tp: TopicIdPartition, fresh: bool = False) -> ColdRange | None:
        hit = self._bounds.get(tp)
        if hit is not None and not fresh and time.monotonic() - hit[0] < self.bounds_ttl_s:
            return hit[1]
        rng: ColdRange | None = await self._run(self._q.bounds, tp)
        _put(self._bounds, tp, (time.monotonic(), rng), self.max_partitions)
        return rng

    async def file_at(self, tp: TopicIdPartition, offset: int) -> ColdFile | None:
        """The file holding `offset`, else the first one after it (compaction gaps), else
        None (past the cold end)."""
        found = self._from_window(self._windows.get(tp), offset)
        if found is not None:
            return found
        epoch = self._epoch  # before the query: a rewrite told mid-query spoils its answer
        files: list[ColdFile] = await self._run(self._q.window, tp, offset, self.window)
        win = _Window(files, epoch)
        _put(self._windows, tp, win, self.max_partitions)
        return self._pick(win, offset, complete=True)

    def _usable(self, win: _Window | None) -> bool:
        return (
            win is not None
            and win.epoch == self._epoch
            and self._listening()
            and time.monotonic() - win.at <= self.window_ttl_s
        )

    def _from_window(self, win: _Window | None, offset: int) -> ColdFile | None:
        if win is None or not self._usable(win):
            return None
        return self._pick(win, offset, complete=False)

    @staticmethod
    def _pick(win: _Window, offset: int, complete: bool) -> ColdFile | None:
        i = bisect.bisect_right(win.bases, offset) - 1
        if i >= 0 and offset <= win.files[i].last_offset:
            return win.files[i]
        # Not inside a file: the next one, if the window shows it is the next in the table
        # (a file after an in-window predecessor, or any file when the window was just read).
        nxt = i + 1
        if nxt < len(win.files) and (complete or i >= 0):
            return win.files[nxt]
        return None

    def invalidate(self, tp: TopicIdPartition) -> None:
        self._windows.pop(tp, None)
        self._bounds.pop(tp, None)

    def invalidate_all(self) -> None:
        """Every cached window is stale (a cold rewrite was announced): from any thread."""
        self._epoch += 1

    def peek_after(self, tp: TopicIdPartition, file: ColdFile, n: int) -> list[ColdFile]:
        """Up to `n` files after `file` that the cached window already knows (prefetch)."""
        win = self._windows.get(tp)
        if win is None or not self._usable(win):
            return []
        i = bisect.bisect_right(win.bases, file.base_offset)
        return win.files[i : i + n]

    async def first_reaching(self, tp: TopicIdPartition, timestamp: int) -> ColdFile | None:
        found: ColdFile | None = await self._run(self._q.first_reaching, tp, timestamp)
        return found

    async def search_files(
        self, tp: TopicIdPartition, start: int, end: int, min_ts: int | None, max_ts: int | None
    ) -> tuple[list[ColdFile], int, int]:
        found: tuple[list[ColdFile], int, int] = await self._run(
            self._q.search_files, tp, start, end, min_ts, max_ts
        )
        return found


def _put(d: OrderedDict[Any, Any], k: Any, v: Any, cap: int) -> None:
    d[k] = v
    d.move_to_end(k)
    while len(d) > cap:
        d.popitem(last=False)
