"""Cold data files straight from S3 with pyarrow (docs/design.md §4, §6): footers, row-group
selection by statistics, and the reads themselves, counted.

A file is opened (one HEAD); its footer comes with the plan when the planner already read
it, else with one ranged GET; then only the chosen
row groups are fetched (pyarrow's pre-buffering coalesces each run of them into one GET).
Every byte fetched goes through `_CountingFile`, so what a scan read is measured, not guessed.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from coldstore.object_store import ObjectStoreConfig
from logformat.schema import CONSUMER_SCHEMA
from schemaformat.typed_decode import TYPED_COLUMNS
from spark_tables.bounds import Bounds
from spark_tables.cold_files import ColdFileInfo

WHOLE_FILE_MAX = 32 << 20  # files read whole by one task are fetched with one GET up to this
# ... and so are files read whole with a projection, up to this: below it the footer GET and a
# GET per row group of the wanted chunks cost more than the bytes they would leave out.
PROJECTED_WHOLE_MAX = 4 << 20
_fs_lock = threading.Lock()
_filesystems: dict[ObjectStoreConfig, pafs.S3FileSystem] = {}


def s3_filesystem(store: ObjectStoreConfig) -> pafs.S3FileSystem:
    """One pyarrow S3 filesystem per configuration per process (Spark reuses workers)."""
    with _fs_lock:
        fs = _filesystems.get(store)
        if fs is None:
            kwargs: dict[str, object] = {
                "region": store.region,
                "connect_timeout": store.connect_timeout_s,
                "request_timeout": store.read_timeout_s,
                "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=store.max_attempts),
            }
            if store.access_key_id and store.secret_access_key:
                kwargs.update(
                    access_key=store.access_key_id,
                    secret_key=store.secret_access_key,
                    session_token=store.session_token,
                )
            if store.endpoint_url:  # path-style addressing: pyarrow's default with an override
                scheme, _, host = store.endpoint_url.partition("://")
                kwargs.update(scheme=scheme or "https", endpoint_override=host.rstrip("/"))
            fs = pafs.S3FileSystem(**kwargs)
            _filesystems[store] = fs
        return fs


class _CountingFile(io.RawIOBase):
    """A read-only file over a pyarrow NativeFile that counts the bytes read."""

    def __init__(self, raw: pa.NativeFile) -> None:
        super().__init__()
        self.raw = raw
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        return int(self.raw.seek(pos, whence))

    def tell(self) -> int:
        return int(self.raw.tell())

    def size(self) -> int:
        return int(self.raw.size())

    def read(self, n: int | None = -1) -> bytes:
        data = self.raw.read(None if n is None or n < 0 else n)
        self.bytes_read += len(data)
        return bytes(data)

    def read_rest(self) -> pa.Buffer:
        """The rest of the file, as pyarrow's buffer (no copy into a bytes object). Not
        `read_buffer`: pyarrow calls a method of that name on file objects, with a size."""
        data = self.raw.read_buffer()
        self.bytes_read += data.size
        return data

    def readinto(self, buf: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.raw.close()
        super().close()


def open_file(store: ObjectStoreConfig, f: ColdFileInfo) -> _CountingFile:
    return _CountingFile(s3_filesystem(store).open_input_file(f"{store.bucket}/{f.key}"))


def read_metadata(store: ObjectStoreConfig, f: ColdFileInfo) -> tuple[pq.FileMetaData, int]:
    """The file's footer, and the bytes fetched to get it."""
    with open_file(store, f) as src:
        md = pq.ParquetFile(src).metadata
        return md, src.bytes_read


# -- row groups -------------------------------------------------------------------------------


class RowGroupStats(NamedTuple):
    start: int  # byte position of its first page
    size: int  # compressed bytes
    min_offset: int | None
    max_offset: int | None
    min_ts: int | None  # ms
    max_ts: int | None


def row_group_stats(md: pq.FileMetaData) -> list[RowGroupStats]:
    out = []
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        start, size = None, 0
        cols: dict[str, tuple[int | None, int | None]] = {}
        for j in range(rg.num_columns):
            c = rg.column(j)
            first = c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset
            start = first if start is None else min(start, first)
            size += c.total_compressed_size
            if c.path_in_schema in ("offset", "timestamp"):
                s = c.statistics
                if s is not None and s.has_min_max:
                    # raw values: int64 offsets and int64 ms timestamps, no datetime detour
                    cols[c.path_in_schema] = (int(s.min_raw), int(s.max_raw))
        o = cols.get("offset", (None, None))
        t = cols.get("timestamp", (None, None))
        out.append(RowGroupStats(start or 0, size, o[0], o[1], t[0], t[1]))
    return out


def select_row_groups(
    stats: Sequence[RowGroupStats], bounds: Bounds, byte_range: tuple[int, int] | None = None
) -> list[int]:
    """Row groups that may hold wanted rows; with a byte range, only those whose midpoint
    lies in it (Spark's rule, so byte-range splits of one file never overlap)."""
    out = []
    for i, s in enumerate(stats):
        if byte_range is not None and not (byte_range[0] <= s.start + s.size // 2 < byte_range[1]):
            continue
        if bounds.overlaps(s.min_offset, s.max_offset, s.min_ts, s.max_ts):
            out.append(i)
    return out


# -- reading ----------------------------------------------------------------------------------


class ReadResult:
    """What one read fetched (filled in while its batches are consumed)."""

    def __init__(self) -> None:
        self.bytes_read = 0
        self.row_groups: list[int] = []
        self.rows = 0


def read_file(
    store: ObjectStoreConfig,
    f: ColdFileInfo,
    bounds: Bounds,
    *,
    row_groups: Sequence[int] | None = None,
    byte_range: tuple[int, int] | None = None,
    metadata: pq.FileMetaData | None = None,
    result: ReadResult | None = None,
    columns: Sequence[str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Batches of the file's rows within `bounds`, in offset order: CONSUMER_SCHEMA, or with
    `columns` only those of its columns (and what the bounds need: offset, timestamp)."""
    result = result if result is not None else ReadResult()
    # A whole file in one GET, unless a projection leaves column chunks of a bigger file
    # out: then the footer and only the chunks wanted (pyarrow's pre-buffering coalesces
    # adjacent ones).
    limit = WHOLE_FILE_MAX if columns is None else PROJECTED_WHOLE_MAX
    whole = row_groups is None and byte_range is None and f.size <= limit
    with open_file(store, f) as src:
        try:
            if whole:  # every row group is wanted: one GET, not footer + row groups
                pf = pq.ParquetFile(src.read_rest(), metadata=metadata)
            else:
                pf = pq.ParquetFile(src, metadata=metadata, pre_buffer=True)
            stats = row_group_stats(pf.metadata)
            if row_groups is None:
                row_groups = select_row_groups(stats, bounds, byte_range)
            result.row_groups = list(row_groups)
            # row groups whose statistics put every row inside the bounds: no per-row
            # comparisons, and with all of them so, no offset or timestamp column to decode
            # for them unless it is wanted
            inside = {
                i: bounds.covers(r.min_offset, r.max_offset, r.min_ts, r.max_ts)
                for i, r in ((i, stats[i]) for i in row_groups)
            }
            filtering = not all(inside.values())
            wanted = parquet_columns(columns, bounds, pf.schema_arrow.names, filtering=filtering)
            for i in row_groups:
                # One thread: Spark runs a task per core, so pyarrow's pool would only add
                # hand-offs between this task's threads and the other tasks' (~20% of decode).
                table = pf.read_row_group(i, columns=wanted, use_threads=False)
                for batch in table.to_batches():
                    batch = conform(batch) if inside[i] else filter_rows(batch, bounds)
                    if batch.num_rows:
                        result.rows += batch.num_rows
                        yield batch
        finally:
            result.bytes_read = src.bytes_read


def parquet_columns(
    columns: Sequence[str] | None,
    bounds: Bounds,
    in_file: Sequence[str] = (),
    *,
    filtering: bool = True,
) -> list[str] | None:
    """The Parquet columns to decode for the source's `columns` (None: all of them): those
    of the record's own, plus, when rows are `filtering`, offset (offset bounds) and
    timestamp when the bounds filter on time, in CONSUMER_SCHEMA's order (offset too when no
    other record column is wanted: a batch keeps its row count through a column); then the
    typed value columns (docs/lake-tables.md) that are wanted and in the file (`in_file`:
    its columns)."""
    typed = [n for n in TYPED_COLUMNS if n in in_file and (columns is None or n in columns)]
    if columns is None:
        return (
            None if set(in_file) <= set(CONSUMER_SCHEMA.names) else [*CONSUMER_SCHEMA.names, *typed]
        )
    need = set(columns) & set(CONSUMER_SCHEMA.names)
    if filtering or not need:
        need.add("offset")
    if filtering and (bounds.ts_lo is not None or bounds.ts_hi is not None):
        need.add("timestamp")
    return [name for name in CONSUMER_SCHEMA.names if name in need] + typed


def conform(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch (CONSUMER_SCHEMA's columns, or some of them, and typed value columns) with
    its record columns cast to CONSUMER_SCHEMA's types."""
    if batch.schema == CONSUMER_SCHEMA:
        return batch
    own = set(CONSUMER_SCHEMA.names)  # the typed columns keep their file's types
    schema = pa.schema(
        [
            CONSUMER_SCHEMA.field(n) if n in own else f
            for n, f in zip(batch.schema.names, batch.schema, strict=True)
        ]
    )
    return batch if batch.schema == schema else batch.cast(schema)


def filter_rows(batch: pa.RecordBatch, bounds: Bounds) -> pa.RecordBatch:
    """The rows within the offset and timestamp bounds. The batch holds CONSUMER_SCHEMA's
    columns, or some of them (offset always, timestamp when the bounds filter on time); its
    columns are cast to CONSUMER_SCHEMA's types."""
    batch = conform(batch)
    masks = []
    offsets = batch.column("offset")
    if bounds.offset_lo > 0:
        masks.append(pc.greater_equal(offsets, bounds.offset_lo))
    if bounds.offset_hi is not None:
        masks.append(pc.less(offsets, bounds.offset_hi))
    if bounds.ts_lo is not None or bounds.ts_hi is not None:
        ts = batch.column("timestamp").view(pa.int64())  # ms since the epoch
        if bounds.ts_lo is not None:
            masks.append(pc.greater_equal(ts, bounds.ts_lo))
        if bounds.ts_hi is not None:
            masks.append(pc.less(ts, bounds.ts_hi))
    if not masks:
        return batch
    mask = masks[0]
    for m in masks[1:]:
        mask = pc.and_(mask, m)
    if pc.all(mask).as_py():
        return batch
    return batch.filter(mask)
