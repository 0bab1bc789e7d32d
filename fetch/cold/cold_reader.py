"""One cold fetch: offset → file (manifest) → row groups (footer statistics) → decoded rows
(ranged GETs, decode off the loop) → the same CONSUMER_SCHEMA batch the hot path returns.

Only the row groups holding the requested offsets are read; a request continues into the
following row groups and files until it has `max_records` / `max_bytes` or reaches `end`.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cluster.read_contract import ColdRead
from fetch.cold.cold_caches import ColdCaches
from fetch.cold.parquet_layout import FileLayout
from logformat.schema import CONSUMER_SCHEMA
from metadata.types import ColdFile, TopicIdPartition

_EMPTY = pa.RecordBatch.from_pylist([], schema=CONSUMER_SCHEMA)
ROW_OVERHEAD = 24  # offset + timestamp + per-record bookkeeping, for max_bytes accounting


class Position(NamedTuple):
    """Where a read stopped: the last row group it used (for the prefetcher)."""

    file: ColdFile
    layout: FileLayout
    group: int


class ReadLimits(NamedTuple):
    """How far one read may go: offsets below `end`, at most these records and bytes."""

    end: int
    max_records: int
    max_bytes: int


class ColdFileReader:
    def __init__(self, caches: ColdCaches, pool: Executor) -> None:
        self._index, self._footers, self._ranges, self._groups = caches
        self._pool = pool

    async def read(
        self, tp: TopicIdPartition, offset: int, limits: ReadLimits
    ) -> tuple[ColdRead, Position | None]:
        end, max_records, max_bytes = limits
        parts: list[pa.Table] = []
        rows = nbytes = 0
        pos = offset
        where: Position | None = None
        while pos < end and rows < max_records and nbytes < max_bytes:
            f = await self._index.file_at(tp, pos)
            if f is None or f.base_offset >= end:
                break
            layout = await self._footers.get(f.object_key, f.size_bytes)
            g = layout.group_for(max(pos, f.base_offset))
            if g is not None:
                await self._warm(f, layout, g, pos, max_records - rows, max_bytes - nbytes)
            while g is not None and g < len(layout.groups):
                if rows >= max_records or nbytes >= max_bytes:
                    break
                if g + 1 < len(layout.groups):  # decode the next one meanwhile (2 threads)
                    self._groups.prefetch(f.object_key, layout, g + 1)
                table = await self._groups.get(f.object_key, layout, g)
                part = _between(table, pos, end)
                if part.num_rows:
                    parts.append(part)
                    rows += part.num_rows
                    nbytes += part.nbytes
                where = Position(f, layout, g)
                pos = max(pos, layout.groups[g].last_offset + 1)
                g += 1
            else:  # the file is done (or had nothing left at or after pos)
                pos = max(pos, f.last_offset + 1)
        if not parts:  # all compacted away up to pos; no progress (pos == offset) if no file
            return ColdRead(_EMPTY, min(pos, end)), where
        loop = asyncio.get_running_loop()
        batch = await loop.run_in_executor(self._pool, _assemble, parts, max_records, max_bytes)
        return ColdRead(batch, int(batch.column(0)[-1].as_py()) + 1), where

    async def _warm(
        self, f: ColdFile, layout: FileLayout, g: int, pos: int, rows: int, nbytes: int
    ) -> None:
        """Fetch the row groups this read will decode with one GET rather than one each."""
        first = last = None
        for grp in layout.groups[g:]:
            if rows <= 0 or nbytes <= 0:
                break
            if not self._groups.has(f.object_key, grp.number):
                first = grp.number if first is None else first
                last = grp.number
            rows -= grp.rows - max(0, pos - grp.first_offset)
            nbytes -= grp.nbytes
        if first is not None and last is not None and last > first:
            await self._ranges.read(
                f.object_key, layout.groups[first].start, layout.groups[last].end
            )


def _between(table: pa.Table, lo: int, hi: int) -> pa.Table:
    """The rows of an offset-sorted table with lo <= offset < hi."""
    offsets = table.column(0)
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    if first >= lo and last < hi:
        return table
    values = offsets.to_numpy()
    i, j = np.searchsorted(values, [lo, hi])
    return table.slice(int(i), int(j - i))


def _assemble(parts: list[pa.Table], max_records: int, max_bytes: int) -> pa.RecordBatch:
    """One batch of at most max_records rows and (beyond the first row) max_bytes bytes."""
    table = pa.concat_tables(parts).slice(0, max_records)
    sizes = (
        pc.fill_null(pc.binary_length(table.column(2)), 0).to_numpy(zero_copy_only=False)
        + pc.fill_null(pc.binary_length(table.column(3)), 0).to_numpy(zero_copy_only=False)
        + ROW_OVERHEAD
    )
    total = np.cumsum(sizes)
    keep = max(1, int(np.searchsorted(total, max_bytes, side="right")))
    batch: pa.RecordBatch = table.slice(0, keep).combine_chunks().to_batches()[0]
    return batch
