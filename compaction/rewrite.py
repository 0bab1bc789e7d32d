"""Rewriting cold data: read data files, keep the latest record per key, write new files.

Written files follow coldstore/parquet_writer.py's conventions exactly (its writer options):
CONSUMER_SCHEMA (then a typed lake table's value_typed / value_error columns, kept as read:
docs/lake-tables.md), zstd, offset-sorted, row groups of about `row_group_bytes`, min/max
statistics and a page index on offset and timestamp, dictionary on key only, a bloom filter
on key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from coldstore.parquet_writer import (
    DEFAULT_ROW_GROUP_BYTES,
    DEFAULT_ZSTD_LEVEL,
    KEY_BLOOM_FILTER,
    MAX_ROWS_PER_GROUP,
    STATS_COLUMNS,
    ParquetFile,
)
from logformat.schema import CONSUMER_SCHEMA

TYPED_COLUMNS = ("value_typed", "value_error")  # tiering/typed_columns.py's


def read_data_file(data: bytes, columns: Sequence[str] | None = None) -> pa.Table:
    """A cold data file's rows (all columns unless `columns`), in CONSUMER_SCHEMA types,
    then the typed columns it has."""
    table = pq.read_table(pa.BufferReader(data), columns=list(columns) if columns else None)
    if columns is None:
        records = table.select(CONSUMER_SCHEMA.names).cast(CONSUMER_SCHEMA)
        for name in (n for n in TYPED_COLUMNS if n in table.column_names):
            records = records.append_column(table.schema.field(name), table.column(name))
        return records
    return table


def concat(tables: Iterable[pa.Table]) -> pa.Table:
    """Rows of several files: typed columns a file lacks are null, and structs of different
    schema versions merge (the union of their fields), as the table's schema did."""
    return pa.concat_tables(tables, promote_options="permissive")


def write_table(
    table: pa.Table,
    out_path: str | os.PathLike[str],
    *,
    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
    compression_level: int = DEFAULT_ZSTD_LEVEL,
) -> ParquetFile:
    """Write offset-sorted CONSUMER_SCHEMA rows as one data file; returns what it holds."""
    if table.num_rows == 0:
        raise ValueError("a data file needs at least one record")
    schema = CONSUMER_SCHEMA
    for name in (n for n in TYPED_COLUMNS if n in table.column_names):
        schema = schema.append(table.schema.field(name))
    table = table.select(schema.names).cast(schema).combine_chunks()
    offsets = table.column("offset")
    if table.num_rows > 1 and not pc.all(pc.less(offsets[:-1], offsets[1:])).as_py():
        raise ValueError("rows are not in strictly increasing offset order")
    per_group = max(1, row_group_bytes * table.num_rows // max(1, table.nbytes))
    with pq.ParquetWriter(
        os.fspath(out_path),
        schema,
        compression="zstd",
        compression_level=compression_level,
        write_statistics=STATS_COLUMNS,
        write_page_index=True,
        use_dictionary=["key"],
        sorting_columns=[pq.SortingColumn(0)],
        bloom_filter_options=KEY_BLOOM_FILTER,
    ) as writer:
        writer.write_table(table, row_group_size=min(per_group, MAX_ROWS_PER_GROUP))
    ts = pc.min_max(table.column("timestamp").cast(pa.int64()))
    return ParquetFile(
        os.fspath(out_path),
        offsets[0].as_py(),
        offsets[-1].as_py(),
        ts["min"].as_py(),
        ts["max"].as_py(),
        table.num_rows,
        os.path.getsize(out_path),
        pq.ParquetFile(os.fspath(out_path)).metadata.num_row_groups,
    )


def split_by_bytes(table: pa.Table, estimated_bytes: int, target_bytes: int) -> list[pa.Table]:
    """Consecutive slices of `table` whose data files come to about `target_bytes` each,
    given the whole table's `estimated_bytes` of Parquet; never an empty slice."""
    if table.num_rows == 0:
        return []
    n = max(1, round(estimated_bytes / max(1, target_bytes)))
    rows = -(-table.num_rows // n)
    return [table.slice(i, rows) for i in range(0, table.num_rows, rows)]


def latest_offsets(keys_and_offsets: pa.Table) -> pa.Array:
    """The offset of the latest record of each non-null key (columns `key`, `offset`)."""
    keyed = keys_and_offsets.filter(pc.is_valid(keys_and_offsets.column("key")))
    if keyed.num_rows == 0:
        return pa.array([], pa.int64())
    grouped = keyed.group_by("key").aggregate([("offset", "max")])
    return grouped.column("offset_max").combine_chunks()


def keep_mask(
    table: pa.Table, latest: pa.Array, tombstone_horizon_ms: int
) -> pa.ChunkedArray | pa.Array:
    """Rows key compaction keeps: null-key records (nothing supersedes them), and each key's
    latest record unless it is a tombstone older than `tombstone_horizon_ms`."""
    is_latest = pc.is_in(table.column("offset"), value_set=latest)
    expired_tombstone = pc.and_(
        pc.is_null(table.column("value")),
        pc.less(table.column("timestamp").cast(pa.int64()), tombstone_horizon_ms),
    )
    return pc.or_(pc.is_null(table.column("key")), pc.and_(is_latest, pc.invert(expired_tombstone)))
