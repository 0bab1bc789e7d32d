"""The Delta log's entries for tierlog's data files: the stats of an add action (readers prune
on offset and timestamp with them), a live file as read back from the log, and the action that
removes one. Pure functions over deltalake's types; coldstore/delta_table.py commits them."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, NamedTuple

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.transaction import RemoveAction

from coldstore.layout import PARTITION_COLUMN
from coldstore.parquet_writer import ParquetFile
from logformat.schema import CONSUMER_SCHEMA

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS = dt.timedelta(milliseconds=1)


class DeltaFile(NamedTuple):
    path: str  # relative to the table root, as in the add action
    partition: int
    size: int
    records: int | None
    min_offset: int | None
    max_offset: int | None
    min_timestamp: int | None  # ms since the epoch
    max_timestamp: int | None


def covers(f: DeltaFile, offset: int) -> bool:
    return (
        f.min_offset is not None
        and f.max_offset is not None
        and (f.min_offset <= offset <= f.max_offset)
    )


def table_schema(schema: pa.Schema = CONSUMER_SCHEMA) -> pa.Schema:
    """The Delta table's schema: the file columns plus the partition column (path-only)."""
    return schema.append(pa.field(PARTITION_COLUMN, pa.int32(), nullable=False))


def app_id(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def iso_ms(ms: int) -> str:
    # Delta stats hold timestamps as ISO-8601 UTC text; ours have millisecond precision.
    return (_EPOCH + dt.timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")[:-6] + "Z"


def to_ms(value: Any) -> int | None:
    return None if value is None else (value - _EPOCH) // _MS


def file_stats(parquet: ParquetFile) -> str:
    """The add action's stats JSON: readers prune on offset and timestamp with it."""
    return json.dumps(
        {
            "numRecords": parquet.records,
            "minValues": {
                "offset": parquet.base_offset,
                "timestamp": iso_ms(parquet.min_timestamp),
            },
            "maxValues": {
                "offset": parquet.last_offset,
                "timestamp": iso_ms(parquet.max_timestamp),
            },
            "nullCount": {"offset": 0, "timestamp": 0},
        },
        separators=(",", ":"),
    )


def live_files(table: DeltaTable) -> list[DeltaFile]:
    """The table's live data files (its add actions), by partition then offset."""
    rows = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    out = [
        DeltaFile(
            path=r["path"],
            partition=int(r[f"partition.{PARTITION_COLUMN}"]),
            size=int(r["size_bytes"]),
            records=r.get("num_records"),
            min_offset=r.get("min.offset"),
            max_offset=r.get("max.offset"),
            min_timestamp=to_ms(r.get("min.timestamp")),
            max_timestamp=to_ms(r.get("max.timestamp")),
        )
        for r in rows
    ]
    out.sort(key=lambda f: (f.partition, -1 if f.min_offset is None else f.min_offset, f.path))
    return out


def remove_action(f: DeltaFile, data_change: bool, now_ms: int) -> RemoveAction:
    """The action removing a live file from the table at `now_ms`."""
    return RemoveAction(
        path=f.path,
        data_change=data_change,
        deletion_timestamp=now_ms,
        size=f.size,
        partition_values={PARTITION_COLUMN: str(f.partition)},
    )
