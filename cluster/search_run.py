"""One partition's search, cold files first (in offset order, a few scanned at once), then
the hot log above the cold end; as the events of the NDJSON answer (docs in
cluster/openapi/search.py): cumulative `progress` of this partition and its `hit`s.

The node supplies the hot log as a `HotSource`; the cold tier comes through the
`ColdSearcher` seam. Cancelling the iteration (the client went away, or the cap was reached)
cancels the scans in flight.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from typing import Any, NamedTuple, Protocol

import pyarrow as pa

from cluster.record_match import matching_rows
from cluster.search_contract import ColdSearcher, ColdSearchPlan, FileHits, SearchQuery
from logformat.render import ValueFormat, render_json_records

FILES_AT_ONCE = 4  # cold files scanned concurrently (their results still go out in order)
HOT_PAGE_RECORDS = 20_000
HOT_PAGE_BYTES = 8 << 20
OFFLOAD_ROWS = 2_000  # hot pages bigger than this are matched off the event loop


class HotSource(Protocol):
    """A partition's hot log, as its leader reads it."""

    def bounds(self) -> tuple[int, int]:
        """[hot log start, high watermark)."""
        ...

    async def read(
        self, offset: int, max_records: int, max_bytes: int
    ) -> tuple[pa.RecordBatch, int]:
        """Records from `offset` (CONSUMER_SCHEMA) and the next offset to read."""
        ...


class PartitionSearch(NamedTuple):
    topic_id: str
    partition: int
    query: SearchQuery
    max_hits: int
    value_format: ValueFormat


class _Progress:
    def __init__(self, partition: int) -> None:
        self.doc: dict[str, Any] = {
            "type": "progress",
            "partition": partition,
            "files_scanned": 0,
            "files_total": 0,
            "bytes_scanned": 0,
            "cold_bytes_scanned": 0,
            "bytes_total": 0,
            "table_bytes": 0,
            "row_groups_read": 0,
            "row_groups_total": 0,
            "hot_records_scanned": 0,
            "hot_records_total": 0,
            "hits": 0,
        }

    def add(self, **counts: int) -> dict[str, Any]:
        for k, v in counts.items():
            self.doc[k] += v
        return dict(self.doc)


async def search_partition(
    s: PartitionSearch, cold: ColdSearcher | None, hot: HotSource | None
) -> AsyncIterator[dict[str, Any]]:
    """The partition's events; without `hot` (a fetch node) only its cold files, and the
    progress documents say where the cold tier ends (`cold_end`, not summed)."""
    progress = _Progress(s.partition)
    plan = ColdSearchPlan(None, (), 0, 0)
    if cold is not None:
        plan = await cold.search_plan(s.topic_id, s.partition, s.query)
        if plan.cold is not None and plan.cold.start > s.query.start_offset:
            # Rows below the cold range's start (a DeleteRecords start inside a file) are gone.
            s = s._replace(query=s.query._replace(start_offset=plan.cold.start))
    progress.doc["cold_end"] = plan.cold.end if plan.cold else 0
    hot_start, hw = hot.bounds() if hot is not None else (0, 0)
    lo = max(s.query.start_offset, hot_start, progress.doc["cold_end"])
    hi = min(s.query.end_offset, hw)
    yield progress.add(
        files_total=len(plan.files),
        bytes_total=sum(f.size_bytes for f in plan.files),
        table_bytes=plan.table_bytes,
        hot_records_total=max(0, hi - lo),
    )
    async for event in _cold_part(s, cold, plan, progress):
        yield event
    if hot is not None and progress.doc["hits"] < s.max_hits and lo < hi:
        async for event in _hot_part(s, hot, lo, hi, progress):
            yield event


async def _cold_part(
    s: PartitionSearch, cold: ColdSearcher | None, plan: ColdSearchPlan, progress: _Progress
) -> AsyncIterator[dict[str, Any]]:
    if cold is None or not plan.files:
        return
    files = list(plan.files)
    tasks: collections.deque[tuple[int, asyncio.Task[FileHits]]] = collections.deque()

    def start_next() -> None:
        if files:
            left = s.max_hits - progress.doc["hits"]
            f = files.pop(0)
            tasks.append((f.size_bytes, asyncio.ensure_future(cold.search_file(f, s.query, left))))

    try:
        for _ in range(FILES_AT_ONCE):
            start_next()
        while tasks:
            size, task = tasks.popleft()
            got = await task
            start_next()
            batch = got.batch.slice(0, s.max_hits - progress.doc["hits"])
            for hit in _hits(batch, s, "cold"):
                yield hit
            yield progress.add(
                files_scanned=1,
                bytes_scanned=got.bytes_read,
                # Of the table's own bytes: a small file's footer GET may cover bytes its
                # column chunks fetch again, which counts them once (issue 27 S12).
                cold_bytes_scanned=min(got.bytes_read, size),
                row_groups_read=got.row_groups_read,
                row_groups_total=got.row_groups,
                hits=batch.num_rows,
            )
            if progress.doc["hits"] >= s.max_hits:
                return
    finally:
        for _, t in tasks:
            t.cancel()


async def _hot_part(
    s: PartitionSearch, hot: HotSource, lo: int, hi: int, progress: _Progress
) -> AsyncIterator[dict[str, Any]]:
    offset = lo
    while offset < hi and progress.doc["hits"] < s.max_hits:
        batch, nxt = await hot.read(offset, HOT_PAGE_RECORDS, HOT_PAGE_BYTES)
        if nxt <= offset:
            break
        left = s.max_hits - progress.doc["hits"]
        if batch.num_rows > OFFLOAD_ROWS:
            rows = await asyncio.to_thread(matching_rows, batch, s.query, left)
        else:
            rows = matching_rows(batch, s.query, left)
        found = batch.take(rows)
        for hit in _hits(found, s, "hot"):
            yield hit
        scanned = min(nxt, hi) - offset
        offset = nxt
        yield progress.add(
            hot_records_scanned=scanned, bytes_scanned=batch.nbytes, hits=found.num_rows
        )


def _hits(batch: pa.RecordBatch, s: PartitionSearch, tier: str) -> list[dict[str, Any]]:
    if not batch.num_rows:
        return []
    return [
        {"type": "hit", "partition": s.partition, "tier": tier, **rec}
        for rec in render_json_records(batch, s.value_format)
    ]
