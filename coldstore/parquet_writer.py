"""Sealed segment → one Parquet data file of the topic's Delta table (docs/design.md §4).

Rows are CONSUMER_SCHEMA (absolute int64 offsets; the partition is in the Delta path, not in
the file), in offset order, zstd, with min/max statistics and a page index on `offset` and
`timestamp`, and row groups of about `row_group_bytes` of Arrow data of the record columns
(extra columns add to a group, never split it) so a reader can fetch one row group with one
range GET.

Memory stays bounded by about one row group: a segment file is memory-mapped (its pages are
the page cache's, not the heap's) and frames are decoded and written one row group at a time.
A sealed segment is immutable and fsynced, so any bad frame in it is corruption, raised, and
never skipped: skipping would silently lose acknowledged records from the only durable copy
that outlives local retention.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import NamedTuple, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from coldstore.timestamp_policy import Clamped, clamp_timestamps
from logformat.frame import CorruptFrameError, decode_header, decode_records, verify_crc
from logformat.records import to_consumer_batch
from logformat.schema import CONSUMER_SCHEMA

MiB = 1 << 20
DEFAULT_ROW_GROUP_BYTES = 4 * MiB
DEFAULT_ZSTD_LEVEL = 3
MAX_ROWS_PER_GROUP = 1 << 20  # Arrow's writer caps row groups at this many rows
STATS_COLUMNS = ["offset", "timestamp"]
EXTRA_BATCH_ROWS = 16_384  # rows the extra columns are computed over at a time (see _extended)
# A bloom filter on `key` per row group, so an erasure finds the files holding a key from
# their footers and filters (coldstore/key_filter.py) instead of reading every file: about
# 32 KiB per row group (of ~4 MiB), under 2% false positives at up to 32k distinct keys.
KEY_BLOOM_FILTER = {"key": {"ndv": 32_768, "fpp": 0.02}}
Source = str | os.PathLike[str] | bytes | bytearray | memoryview


class CorruptSegmentError(CorruptFrameError):
    """A sealed segment holds bytes that are not whole, valid, ordered frames."""


class EmptyRangeError(ValueError):
    """No record of the segment falls in [from_offset, to_offset)."""


class ExtraColumns(Protocol):
    """Columns computed from the records' values and written beside them (tiering's typed
    value columns, docs/lake-tables.md): their fields, and their arrays for some values.
    `fields` is read after the first `columns` call (the file's schema is only fixed then)
    and must not change afterwards."""

    @property
    def fields(self) -> list[pa.Field]: ...

    def columns(self, values: pa.Array) -> list[pa.Array]: ...


class ParquetFile(NamedTuple):
    output: str | bytes  # the path written, or the file's bytes when no path was given
    base_offset: int  # first offset in the file
    last_offset: int  # last offset in the file (inclusive)
    min_timestamp: int  # ms since the epoch
    max_timestamp: int
    records: int
    size_bytes: int
    row_groups: int
    # Records whose timestamp the cold tier cannot hold: kept, clamped, the original in a
    # header (coldstore/timestamp_policy.py); the caller reports them.
    clamped: tuple[Clamped, ...] = ()


def iter_consumer_batches(
    buf: pa.Buffer | bytes | bytearray | memoryview,
    from_offset: int | None = None,
    to_offset: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """CONSUMER_SCHEMA batches of the frames in `buf`, CRC-checked, limited to
    [from_offset, to_offset). Raises CorruptSegmentError on any bad or out-of-order frame."""
    pos, end, last = 0, len(buf), -1
    while pos < end:
        try:
            header = decode_header(buf, pos)
            verify_crc(buf, pos, header)
            if header.base_offset <= last:
                raise CorruptFrameError(
                    f"frame at byte {pos} starts at offset {header.base_offset}, not after {last}"
                )
            if to_offset is not None and header.base_offset >= to_offset:
                return  # frames are in offset order: nothing further is wanted
            batch = decode_records(buf, pos, verify=False)
            # record_count is the frame's offset span: a frame the broker's log cleaner
            # compacted holds fewer rows (offset gaps), possibly none; never more.
            if batch.num_rows > header.record_count:
                raise CorruptFrameError(
                    f"frame at byte {pos} says {header.record_count} records, "
                    f"holds {batch.num_rows}"
                )
            deltas = batch.column(0)
            if len(deltas) and (
                deltas[0].as_py() < 0
                or (len(deltas) > 1 and not pc.all(pc.less(deltas[:-1], deltas[1:])).as_py())
            ):
                raise CorruptFrameError(f"frame at byte {pos} has unordered offset deltas")
        except CorruptFrameError as exc:
            raise CorruptSegmentError(str(exc)) from exc
        pos += header.size
        last = header.last_offset
        if not batch.num_rows:
            continue  # every record of the span was compacted away
        out = to_consumer_batch(batch, header.base_offset)
        offsets = out.column(0)
        lo, hi = offsets[0].as_py(), offsets[-1].as_py()
        if from_offset is not None and hi < from_offset:
            continue
        if (from_offset is not None and lo < from_offset) or (
            to_offset is not None and hi >= to_offset
        ):
            mask = pc.and_(
                pc.greater_equal(offsets, from_offset if from_offset is not None else lo),
                pc.less(offsets, to_offset if to_offset is not None else hi + 1),
            )
            out = out.filter(mask)
        if out.num_rows:
            yield out


@contextlib.contextmanager
def segment_buffer(source: Source) -> Iterator[pa.Buffer | bytes | bytearray | memoryview]:
    if isinstance(source, bytes | bytearray | memoryview):
        yield source
        return
    # Arrow's memory map: buffers sliced from it keep the mapping alive on their own, so no
    # BufferError if a decoded batch outlives the `with`.
    with pa.memory_map(os.fspath(source), "r") as mm:
        yield mm.read_buffer()


def write_parquet(
    segment: Source,
    out_path: str | os.PathLike[str] | None = None,
    *,
    from_offset: int | None = None,
    to_offset: int | None = None,
    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
    compression_level: int = DEFAULT_ZSTD_LEVEL,
    extra: ExtraColumns | None = None,
    keep: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
) -> ParquetFile:
    """Write the records of `segment` (a segment file path, or its bytes) with offsets in
    [from_offset, to_offset) as Parquet to `out_path`, or to memory when it is None; with
    `extra`, its columns after the record columns. `keep` filters each batch first
    (tiering/txn_filter.py: no aborted records, no markers)."""
    if row_group_bytes <= 0:
        raise ValueError("row_group_bytes must be positive")
    sink: str | pa.BufferOutputStream = (
        os.fspath(out_path) if out_path is not None else pa.BufferOutputStream()
    )
    # The writer opens with the first batch: extra columns know their fields only then.
    writer = _LazyWriter(sink, compression_level)
    stats = _Stats()
    pending: list[pa.RecordBatch] = []
    pending_bytes = 0
    try:
        with segment_buffer(segment) as buf:
            batches = _kept(iter_consumer_batches(buf, from_offset, to_offset), keep, stats)
            for batch in batches if extra is None else _extended(batches, extra):
                stats.add(batch)
                pending.append(batch)
                pending_bytes += _record_bytes(batch)
                if pending_bytes >= row_group_bytes:
                    pending, pending_bytes = stats.flush(
                        writer, pending, pending_bytes, row_group_bytes, final=False
                    )
            if pending:
                stats.flush(writer, pending, pending_bytes, row_group_bytes, final=True)
        writer.close()
    except BaseException:
        writer.close()
        if out_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(out_path)
        raise
    if stats.records == 0:  # the writer never opened: no file was made
        raise EmptyRangeError(f"no records in [{from_offset}, {to_offset})")
    if isinstance(sink, pa.BufferOutputStream):
        output: str | bytes = sink.getvalue().to_pybytes()
        size = len(output)
    else:
        output, size = sink, os.path.getsize(sink)
    return ParquetFile(
        output,
        stats.base_offset,
        stats.last_offset,
        stats.min_ts,
        stats.max_ts,
        stats.records,
        size,
        stats.row_groups,
        tuple(stats.clamped),
    )


def _record_bytes(batch: pa.RecordBatch) -> int:
    # Row groups are sized by the record columns alone, extra columns or not: a typed file
    # then has the row groups of a bytes-only one (fewer, larger groups cost the writer less
    # per row, and a group is still one range GET).
    return sum(batch.column(i).nbytes for i in range(len(CONSUMER_SCHEMA)))


def _kept(
    batches: Iterator[pa.RecordBatch],
    keep: Callable[[pa.RecordBatch], pa.RecordBatch] | None,
    stats: _Stats,
) -> Iterator[pa.RecordBatch]:
    for raw in batches:
        if keep is not None and not (raw := keep(raw)).num_rows:
            continue
        batch, clamped = clamp_timestamps(raw)
        stats.clamped.extend(clamped)
        yield batch


def _extended(batches: Iterator[pa.RecordBatch], extra: ExtraColumns) -> Iterator[pa.RecordBatch]:
    """The batches with the extra columns, computed over runs of EXTRA_BATCH_ROWS rows: a
    frame holds few records, and computing them per frame costs more in per-call overhead
    than in work (tiering's typed columns, docs/lake-tables.md)."""
    run: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        run.append(batch)
        rows += batch.num_rows
        if rows >= EXTRA_BATCH_ROWS:
            yield _with_extra(run, extra)
            run, rows = [], 0
    if run:
        yield _with_extra(run, extra)


def _with_extra(run: list[pa.RecordBatch], extra: ExtraColumns) -> pa.RecordBatch:
    # One batch of the run (a copy, but cheaper than one batch per frame downstream).
    batch = run[0] if len(run) == 1 else pa.concat_batches(run)
    columns = extra.columns(batch.column("value"))
    schema = CONSUMER_SCHEMA
    for f in extra.fields:
        schema = schema.append(f)
    return pa.RecordBatch.from_arrays([*batch.columns, *columns], schema=schema)


class _LazyWriter:
    """pq.ParquetWriter with the file's settings, opened with the schema of its first table."""

    def __init__(self, sink: str | pa.BufferOutputStream, compression_level: int) -> None:
        self.sink, self.compression_level = sink, compression_level
        self.writer: pq.ParquetWriter | None = None

    def write_table(self, table: pa.Table, row_group_size: int) -> None:
        if self.writer is None:
            self.writer = pq.ParquetWriter(
                self.sink,
                table.schema,
                compression="zstd",
                compression_level=self.compression_level,
                write_statistics=STATS_COLUMNS,  # not key/value: big, useless min/max
                write_page_index=True,  # page-level offset pruning inside a row group
                use_dictionary=["key"],  # keys repeat; values mostly don't
                sorting_columns=[pq.SortingColumn(0)],  # rows are sorted by offset
                bloom_filter_options=KEY_BLOOM_FILTER,
                column_encoding=delta_integer_columns(table.schema) or None,
            )
        self.writer.write_table(table, row_group_size=row_group_size)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def delta_integer_columns(schema: pa.Schema) -> dict[str, str]:
    """DELTA_BINARY_PACKED for the integer leaves (ints, dates, timestamps) of the extra
    columns: ids, counts and times of typed values are close to their neighbours, so their
    deltas pack into a few bits; zstd then has a fraction of PLAIN's bytes to compress,
    which makes the file both smaller and faster to write (docs/lake-tables.md, "Cost")."""
    extra = [f for f in schema if f.name not in CONSUMER_SCHEMA.names]
    return {path: "DELTA_BINARY_PACKED" for f in extra for path in _integer_leaves(f.name, f.type)}


def _integer_leaves(path: str, t: pa.DataType) -> Iterator[str]:
    """The Parquet column paths of the integer leaves under `path` (Arrow's names for them)."""
    if pa.types.is_struct(t):
        for child in t:
            yield from _integer_leaves(f"{path}.{child.name}", child.type)
    elif pa.types.is_map(t):
        yield from _integer_leaves(f"{path}.key_value.key", t.key_type)
        yield from _integer_leaves(f"{path}.key_value.value", t.item_type)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        yield from _integer_leaves(f"{path}.list.element", t.value_type)
    elif pa.types.is_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t):
        yield path


class _Stats:
    """What the file holds, for the Delta add action and the manifest."""

    def __init__(self) -> None:
        self.base_offset = -1
        self.last_offset = -1
        self.min_ts: int = 2**63 - 1
        self.max_ts: int = -(2**63)
        self.records = 0
        self.row_groups = 0
        self.clamped: list[Clamped] = []

    def add(self, batch: pa.RecordBatch) -> None:
        offsets = batch.column(0)
        if self.records == 0:
            self.base_offset = offsets[0].as_py()
        self.last_offset = offsets[-1].as_py()
        mm = pc.min_max(batch.column(1).view(pa.int64()))
        self.min_ts = min(self.min_ts, mm["min"].as_py())
        self.max_ts = max(self.max_ts, mm["max"].as_py())
        self.records += batch.num_rows

    def flush(
        self,
        writer: _LazyWriter,
        pending: list[pa.RecordBatch],
        pending_bytes: int,
        row_group_bytes: int,
        *,
        final: bool,
    ) -> tuple[list[pa.RecordBatch], int]:
        """Write whole row groups of what is pending; return the rest (all of it if final)."""
        table = pa.Table.from_batches(pending)
        rows = table.num_rows
        # Rows per group from the average row size seen so far in this group's data.
        per_group = max(1, row_group_bytes * rows // max(1, pending_bytes))
        per_group = min(per_group, MAX_ROWS_PER_GROUP)
        n = rows if final else rows // per_group * per_group
        if n:
            writer.write_table(table.slice(0, n), row_group_size=per_group)
            self.row_groups += -(-n // per_group)
        if n == rows:
            return [], 0
        rest = table.slice(n)
        return rest.to_batches(), pending_bytes * (rows - n) // rows
