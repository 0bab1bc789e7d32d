"""Searching a partition's cold files (cluster/search_contract.py): the manifest prunes files
by their offset and timestamp ranges, each file's footer prunes row groups by their min/max
statistics (offset, timestamp; key where a file has them); of the row groups left, only the
column chunks the predicate needs are fetched (one ranged GET for adjacent chunks) and
matched with pyarrow compute; only row groups with matches have their other columns fetched.

Column chunks go straight to the object store, not through the range cache: a scan reads
each byte once, and would only push consumers' cached ranges out. Footers do go through
the footer cache (a repeated search skips them). Decoding and matching run on the decode pool.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from cluster.record_match import matching_rows
from cluster.search_contract import ColdSearchPlan, FileHits, SearchQuery
from fetch.cold import metrics
from fetch.cold.cold_index import ColdIndex
from fetch.cold.footer_cache import FooterCache
from fetch.cold.parquet_layout import (
    TAIL_GUESS,
    FileLayout,
    RowGroup,
    SparseFile,
    top_level_columns,
)
from fetch.cold.store import RangeStore
from logformat.schema import CONSUMER_SCHEMA
from metadata.types import ColdFile, TopicIdPartition

MERGE_GAP = 64 * 1024  # chunks closer than this are fetched with one GET
FOOTERS_AHEAD = 32  # footers fetched as soon as the plan is known
GROUPS_AHEAD = 4  # a file's row groups whose predicate chunks are in flight at once
_ALL = [f.name for f in CONSUMER_SCHEMA]
_EMPTY = pa.RecordBatch.from_pylist([], schema=CONSUMER_SCHEMA)


class _Scan(NamedTuple):
    batch: pa.RecordBatch | None  # the matches of one row group (None: none)
    bytes_read: int


class ColdSearch:
    def __init__(
        self, index: ColdIndex, footers: FooterCache, store: RangeStore, pool: Executor
    ) -> None:
        self._index, self._footers, self._store, self._pool = index, footers, store, pool
        self._read_ahead: set[str] = set()  # footers asked for by a plan, not yet counted

    async def plan(self, tp: TopicIdPartition, query: SearchQuery) -> ColdSearchPlan:
        cold = await self._index.bounds(tp, fresh=True)
        if cold is None:
            return ColdSearchPlan(None, (), 0, 0)
        start = max(query.start_offset, cold.start)  # not below a DeleteRecords start
        files, count, size = await self._index.search_files(
            tp, start, query.end_offset, query.start_timestamp, query.end_timestamp
        )
        # A file committed after the bounds were read is left to the hot scan (no doubles).
        kept = tuple(f for f in files if f.base_offset < cold.end)
        if len(self._read_ahead) > 4096:  # left by searches cancelled before their scans
            self._read_ahead.clear()
        for f in kept[:FOOTERS_AHEAD]:  # footers are small GETs: ask for them all at once
            if self._footers.cached(f.object_key) is None:
                self._read_ahead.add(f.object_key)  # counted by the scan that uses it
                asyncio.ensure_future(
                    self._footers.get(f.object_key, f.size_bytes)
                ).add_done_callback(_seen)
        return ColdSearchPlan(cold, kept, count, size)

    async def scan_file(self, f: ColdFile, query: SearchQuery, max_hits: int) -> FileHits:
        fresh = f.object_key in self._read_ahead or self._footers.cached(f.object_key) is None
        self._read_ahead.discard(f.object_key)
        layout = await self._footers.get(f.object_key, f.size_bytes)
        nbytes = min(TAIL_GUESS, f.size_bytes) if fresh else 0
        groups = [g for g in layout.groups if may_match(layout, g, query)]
        metrics.SEARCH_FILES.inc()
        metrics.SEARCH_ROW_GROUPS.labels("pruned").inc(len(layout.groups) - len(groups))
        metrics.SEARCH_ROW_GROUPS.labels("read").inc(len(groups))
        parts: list[pa.RecordBatch] = []
        hits = 0
        cols = query.predicate_columns()
        numbers = [g.number for g in groups]
        # The predicate chunks of the next few row groups are fetched while one is matched: a
        # big segment's file has hundreds of row groups.
        ahead: collections.deque[asyncio.Future[tuple[list[tuple[int, bytes]], int]]]
        ahead = collections.deque()
        try:
            for i, group in enumerate(numbers):
                if hits >= max_hits:
                    break
                for nxt in numbers[i + len(ahead) : i + GROUPS_AHEAD]:
                    ahead.append(
                        asyncio.ensure_future(self._fetch(f.object_key, layout, nxt, cols))
                    )
                pieces, got_bytes = await ahead.popleft()
                got = await self._match(f, layout, group, query, max_hits - hits, pieces)
                nbytes += got_bytes + got.bytes_read
                if got.batch is not None:
                    parts.append(got.batch)
                    hits += got.batch.num_rows
        finally:
            for t in ahead:
                t.cancel()
                t.add_done_callback(_seen)
        batch = _EMPTY if not parts else _concat(parts)
        return FileHits(batch, nbytes, len(layout.groups), len(groups))

    async def _match(
        self,
        f: ColdFile,
        layout: FileLayout,
        group: int,
        query: SearchQuery,
        limit: int,
        pieces: list[tuple[int, bytes]],
    ) -> _Scan:
        """The group's matches, from its predicate chunks; then its other columns for them
        (bytes_read: those only)."""
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(
            self._pool, _match_group, layout, pieces, group, query, limit
        )
        if found is None:
            return _Scan(None, 0)
        matched, rows = found
        rest = [c for c in _ALL if c not in query.predicate_columns()]
        more, extra = await self._fetch(f.object_key, layout, group, rest)
        batch = await loop.run_in_executor(
            self._pool, _complete, layout, more, group, rest, matched, rows
        )
        return _Scan(batch, extra)

    async def _fetch(
        self, key: str, layout: FileLayout, group: int, columns: Sequence[str]
    ) -> tuple[list[tuple[int, bytes]], int]:
        spans = column_spans(layout, group, columns)
        datas = await asyncio.gather(*(self._store.get_range(key, s, e) for s, e in spans))
        size = sum(len(d) for d in datas)
        metrics.GET_REQUESTS.labels("search").inc(len(spans))
        metrics.GET_BYTES.labels("search").inc(size)
        return [(s, d) for (s, _), d in zip(spans, datas, strict=True)], size


def may_match(layout: FileLayout, g: RowGroup, q: SearchQuery) -> bool:
    """False when the row group's statistics rule out every match."""
    if g.last_offset < q.start_offset or g.first_offset >= q.end_offset:
        return False
    t0, t1 = q.start_timestamp, q.end_timestamp
    if t0 is not None and g.max_timestamp is not None and g.max_timestamp < t0:
        return False
    if t1 is not None and g.min_timestamp is not None and g.min_timestamp >= t1:
        return False
    if q.typed_path is not None and not typed_may_match(layout, g.number, q):
        return False
    return q.key is None or _key_in_range(layout, g.number, q.key)


def typed_may_match(layout: FileLayout, group: int, q: SearchQuery) -> bool:
    """False for a file without typed columns (written before lake.mode was set) or whose
    struct lacks the field (an older schema version), and where the field's min/max
    statistics rule the value out."""
    md = layout.metadata
    if "value_typed" not in top_level_columns(md):
        return False
    assert q.typed_path is not None
    leaf = ".".join(("value_typed", *q.typed_path))
    want = q.typed_value
    if not any(_under(md.schema.column(j).path, leaf) for j in range(md.num_columns)):
        return False  # the file's struct has no such field: every value of it is null
    for j in range(md.num_columns):
        col = md.row_group(group).column(j)
        if col.path_in_schema != leaf:
            continue
        stats = col.statistics
        if stats is None or not stats.has_min_max or isinstance(want, bool):
            return True
        lo, hi = stats.min, stats.max
        if isinstance(want, str) and isinstance(lo, str) and isinstance(hi, str):
            return lo <= want <= hi
        if isinstance(want, int | float) and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in (lo, hi)
        ):
            return bool(lo <= want <= hi)
        return True
    return True


def _key_in_range(layout: FileLayout, group: int, key: bytes) -> bool:
    """Files written without key statistics (ours, by default: random keys make them useless)
    cannot rule a key out."""
    md = layout.metadata
    for j in range(md.num_columns):
        col = md.row_group(group).column(j)
        if col.path_in_schema != "key":
            continue
        stats = col.statistics
        if stats is None or not stats.has_min_max:
            return True
        lo, hi = stats.min, stats.max
        if isinstance(lo, bytes | str) and isinstance(hi, bytes | str):
            lo_b = lo.encode() if isinstance(lo, str) else lo
            hi_b = hi.encode() if isinstance(hi, str) else hi
            return lo_b <= key <= hi_b
    return True


def column_spans(layout: FileLayout, group: int, columns: Sequence[str]) -> list[tuple[int, int]]:
    """Byte ranges covering the chunks of these columns in a row group (top-level names, or
    dotted paths into a struct: value_typed.ship.city), adjacent ones merged (offset,
    timestamp and key are stored side by side: one GET)."""
    rg = layout.metadata.row_group(group)
    chunks = []
    for j in range(rg.num_columns):
        col = rg.column(j)
        if not any(_under(col.path_in_schema, c) for c in columns):
            continue
        first = col.dictionary_page_offset if col.has_dictionary_page else None
        begin = col.data_page_offset if first is None else min(first, col.data_page_offset)
        chunks.append((begin, begin + col.total_compressed_size))
    chunks.sort()
    spans: list[tuple[int, int]] = []
    for s, e in chunks:
        if spans and s - spans[-1][1] <= MERGE_GAP:
            spans[-1] = (spans[-1][0], max(spans[-1][1], e))
        else:
            spans.append((s, e))
    return spans


def _under(path: str, column: str) -> bool:
    return path == column or path.startswith(column + ".")


def _read(
    layout: FileLayout, pieces: list[tuple[int, bytes]], group: int, columns: list[str]
) -> pa.Table:
    reader = pq.ParquetFile(SparseFile(layout.size, pieces), metadata=layout.metadata)
    return reader.read_row_group(group, columns=columns, use_threads=False)


def _match_group(
    layout: FileLayout,
    pieces: list[tuple[int, bytes]],
    group: int,
    query: SearchQuery,
    limit: int,
) -> tuple[pa.Table, pa.Array] | None:
    """(the predicate columns' matching rows, their row numbers), or None: no match."""
    table = _read(layout, pieces, group, query.predicate_columns())
    rows = matching_rows(table, query, limit)
    return None if len(rows) == 0 else (table.take(rows), rows)


def _complete(
    layout: FileLayout,
    pieces: list[tuple[int, bytes]],
    group: int,
    rest: list[str],
    matched: pa.Table,
    rows: pa.Array,
) -> pa.RecordBatch:
    """The matched rows with every column, as CONSUMER_SCHEMA."""
    others = _read(layout, pieces, group, rest).take(rows)
    columns = [
        matched.column(name) if name in matched.column_names else others.column(name)
        for name in _ALL
    ]
    table = pa.Table.from_arrays(columns, schema=CONSUMER_SCHEMA)
    return table.combine_chunks().to_batches()[0]


def _seen(future: asyncio.Future[Any]) -> None:
    """A read ahead that failed is reported by the read that needs it (if any), not here."""
    if not future.cancelled():
        future.exception()


def _concat(parts: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(parts) == 1:
        return parts[0]
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
