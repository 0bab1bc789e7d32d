"""Reading one input partition in a Spark task: a cold slice from S3 or a hot range from the
brokers, as Arrow batches in the source's schema.

Plans can go stale while a query runs, and reads recover rather than fail or skip:
- a hot range whose records were tiered and deleted from the brokers is read from the
  cold files that now hold them (hot.read_hot's fallback);
- a planned cold file that compaction replaced (and whose object is gone after the grace
  period) is re-planned: its offset range is read from the current cold files.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark_tables import report
from spark_tables.bounds import Bounds
from spark_tables.cold_files import list_cold_files
from spark_tables.columns import OutputConverter
from spark_tables.hot import describe, read_hot
from spark_tables.options import SourceOptions
from spark_tables.parquet_read import (
    ReadResult,
    filter_rows,
    open_file,
    read_file,
    row_group_stats,
)
from spark_tables.planner import ColdGroup, ColdSlice, HotRange
from spark_tables.typed import TYPED


def read_piece(
    opts: SourceOptions, piece: Any, converter: OutputConverter
) -> Iterator[pa.RecordBatch]:
    if isinstance(piece, ColdGroup):  # small files packed into one task, read in order
        for s in piece.slices:
            yield from read_piece(opts, s, converter)
        return
    if isinstance(piece, ColdSlice):
        batches = _read_slice(opts, piece)
    elif isinstance(piece, HotRange):
        batches = _read_hot(opts, piece)
        if TYPED in converter.target.names:  # decoded as tiering decodes them
            from spark_tables.typed_hot import HotTyped  # here: only hot typed reads need it

            batches = HotTyped(opts, converter.target.field(TYPED).type).add(batches)
    else:  # Spark's InputPartition(None) when the plan is empty
        return
    for batch in batches:
        yield converter.convert(batch, piece.partition)


def _read_slice(opts: SourceOptions, s: ColdSlice) -> Iterator[pa.RecordBatch]:
    result = ReadResult()
    rows_out = 0
    try:
        for batch in read_file(
            opts.store,
            s.file,
            s.bounds,
            row_groups=s.row_groups,
            byte_range=s.byte_range,
            metadata=s.metadata,
            result=result,
            columns=opts.columns,
        ):
            rows_out += batch.num_rows
            yield batch
    except FileNotFoundError:
        if rows_out:
            raise
        yield from _replan(opts, s)
    report.write(
        opts.report_dir,
        {
            "kind": "read",
            "key": s.file.key,
            "partition": s.file.partition,
            "row_groups": result.row_groups,
            "bytes_read": result.bytes_read,
            "rows": result.rows,
        },
    )


def _replan(opts: SourceOptions, s: ColdSlice) -> Iterator[pa.RecordBatch]:
    """The slice's file is gone (compaction replaced it): read its offsets from the files
    that hold them now."""
    if s.byte_range is not None and s.byte_range[0] > 0:
        return  # the file's first slice re-reads the whole file's range
    lo, hi = s.file.min_offset, s.file.max_offset
    if s.row_groups is not None and s.metadata is not None:
        stats = [row_group_stats(s.metadata)[i] for i in s.row_groups]
        lows = [r.min_offset for r in stats if r.min_offset is not None]
        highs = [r.max_offset for r in stats if r.max_offset is not None]
        lo, hi = (min(lows), max(highs)) if lows and highs else (lo, hi)
    if lo is None or hi is None:
        raise FileNotFoundError(f"{s.file.key} is gone and its offset range is unknown")
    yield from read_cold_range(opts, s.file.partition, lo, hi + 1, s.bounds, retry=False)


def read_cold_range(
    opts: SourceOptions, partition: int, lo: int, hi: int, bounds: Bounds, *, retry: bool = True
) -> Iterator[pa.RecordBatch]:
    """Offsets [lo, hi) of `partition` from the cold files as they are now."""
    b = bounds.intersect(Bounds(offset_lo=lo, offset_hi=hi))
    listing = list_cold_files(opts, [partition])
    for f in listing.by_partition().get(partition, ()):
        if b.overlaps(f.min_offset, f.max_offset, f.min_timestamp, f.max_timestamp):
            try:
                yield from read_file(opts.store, f, b, columns=opts.columns)
            except FileNotFoundError:
                if not retry:
                    raise
                yield from read_cold_range(opts, partition, lo, hi, bounds, retry=False)
                return


def _read_hot(opts: SourceOptions, h: HotRange) -> Iterator[pa.RecordBatch]:
    assert opts.broker_url is not None
    rows = 0

    def cold(partition: int, lo: int, hi: int) -> Iterator[pa.RecordBatch]:
        return read_cold_range(opts, partition, lo, hi, Bounds())

    for batch in read_hot(
        opts.broker_url, opts.topic, h.partition, h.start, h.end, cold, opts.api_key
    ):
        batch = filter_rows(batch, h.bounds)
        if batch.num_rows:
            rows += batch.num_rows
            yield batch
    report.write(
        opts.report_dir,
        {"kind": "hot", "partition": h.partition, "start": h.start, "end": h.end, "rows": rows},
    )


def sample_values(opts: SourceOptions, n: int) -> list[bytes]:
    """Up to n non-null values from the start of the cold data (else the hot data), for
    inferring a JSON schema."""
    out: list[bytes] = []
    for f in list_cold_files(opts).files:
        with open_file(opts.store, f) as src:
            pf = pq.ParquetFile(src)
            for i in range(pf.metadata.num_row_groups):
                col = pf.read_row_group(i, columns=["value"]).column(0)
                out.extend(v for v in col.to_pylist() if v is not None)
                if len(out) >= n:
                    return out[:n]
    if opts.broker_url and not out:
        for p, e in describe(opts.broker_url, opts.topic, opts.api_key).items():
            start = e.hot_start if e.hot_start is not None else e.log_start
            end = min(e.last_stable, start + n)
            for batch in read_hot(
                opts.broker_url, opts.topic, p, start, end, _no_cold, opts.api_key
            ):
                out.extend(v for v in batch.column(3).to_pylist() if v is not None)
            if len(out) >= n:
                break
    return out[:n]


def _no_cold(partition: int, lo: int, hi: int) -> Iterator[pa.RecordBatch]:
    return iter(())
