"""The typed value columns of cold records (docs/lake-tables.md), read only when a fetch asks
for them (`?columns=`): for the offsets a cold read returned, just the `offset` chunks and
the asked columns' chunks of the row groups holding them are fetched (ranged GETs, as a
search does), never the record columns again.

Files of one answer may hold different versions of the typed struct (a schema version added
fields between them) or none (written before the topic was typed): the parts are cast to the
merge of their types, as Delta's schema evolution merged them, and a file's missing columns
read as nulls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Executor

import pyarrow as pa
import pyarrow.parquet as pq

from fetch.cold import metrics
from fetch.cold.cold_index import ColdIndex
from fetch.cold.cold_search import column_spans
from fetch.cold.footer_cache import FooterCache
from fetch.cold.parquet_layout import FileLayout, SparseFile, top_level_columns
from fetch.cold.store import RangeStore
from metadata.types import TopicIdPartition
from schemaformat.arrow_merge import TypeConflict, merge, normalize
from schemaformat.typed_decode import TYPED_COLUMNS

TYPED, ERROR = TYPED_COLUMNS


class TypedColumnReader:
    def __init__(
        self, index: ColdIndex, footers: FooterCache, store: RangeStore, pool: Executor
    ) -> None:
        self._index, self._footers, self._store, self._pool = index, footers, store, pool

    async def read(
        self, tp: TopicIdPartition, first: int, last: int, columns: Sequence[str]
    ) -> pa.Table:
        """`offset` and `columns` of the cold rows with first <= offset <= last."""
        parts: list[pa.Table] = []
        pos = first
        while pos <= last:
            f = await self._index.file_at(tp, pos)
            if f is None or f.base_offset > last:
                break
            layout = await self._footers.get(f.object_key, f.size_bytes)
            for g in layout.groups:
                if g.last_offset < pos or g.first_offset > last:
                    continue
                parts.append(await self._group(f.object_key, layout, g.number, columns))
            pos = max(pos, f.last_offset + 1)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, _joined, parts, columns, first, last)

    async def _group(
        self, key: str, layout: FileLayout, group: int, columns: Sequence[str]
    ) -> pa.Table:
        have = top_level_columns(layout.metadata)
        present = [c for c in columns if c in have]
        spans = column_spans(layout, group, ["offset", *present])
        datas = await asyncio.gather(*(self._store.get_range(key, s, e) for s, e in spans))
        metrics.GET_REQUESTS.labels("typed").inc(len(spans))
        metrics.GET_BYTES.labels("typed").inc(sum(len(d) for d in datas))
        pieces = [(s, d) for (s, _), d in zip(spans, datas, strict=True)]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, _read, layout, pieces, group, ["offset", *present]
        )


def _read(
    layout: FileLayout, pieces: list[tuple[int, bytes]], group: int, columns: list[str]
) -> pa.Table:
    reader = pq.ParquetFile(SparseFile(layout.size, pieces), metadata=layout.metadata)
    return reader.read_row_group(group, columns=columns, use_threads=False)


def _target(parts: list[pa.Table], name: str) -> pa.DataType:
    """The column's type over every part: error is text; the struct is the merge of the
    parts' structs (null when no part has one)."""
    if name == ERROR:
        return pa.string()
    found: pa.DataType | None = None
    for part in parts:
        if name in part.column_names:
            t = normalize(part.schema.field(name).type)
            found = t if found is None else merge(found, t)
    return pa.null() if found is None else found


def _joined(parts: list[pa.Table], columns: Sequence[str], first: int, last: int) -> pa.Table:
    try:
        targets = {name: _target(parts, name) for name in columns}
    except TypeConflict as exc:  # tiering never writes such files: a table someone altered
        raise pa.ArrowInvalid(f"the cold files' typed columns do not merge: {exc}") from None
    fields = [pa.field("offset", pa.int64()), *(pa.field(n, targets[n]) for n in columns)]
    schema = pa.schema(fields)
    fitted = []
    for part in parts:
        arrays = [part.column("offset").cast(pa.int64())]
        for name in columns:
            if name in part.column_names:
                arrays.append(part.column(name).cast(targets[name]))
            else:
                arrays.append(pa.chunked_array([pa.nulls(part.num_rows, targets[name])]))
        fitted.append(pa.Table.from_arrays(arrays, schema=schema))
    table = pa.concat_tables(fitted) if fitted else schema.empty_table()
    offsets = table.column("offset")
    keep = pa.compute.and_(
        pa.compute.greater_equal(offsets, first), pa.compute.less_equal(offsets, last)
    )
    return table.filter(keep).combine_chunks()
