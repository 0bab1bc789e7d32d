"""Which Parquet columns a read decodes: what the query wants, plus what filtering needs."""

from __future__ import annotations

from logformat.schema import CONSUMER_SCHEMA
from spark_tables.bounds import Bounds
from spark_tables.parquet_read import parquet_columns

IN_FILE = CONSUMER_SCHEMA.names


def test_filtering_rows_decodes_offset_and_for_a_time_bound_timestamp() -> None:
    window = Bounds(ts_lo=5, ts_hi=9)
    assert parquet_columns(("key",), Bounds(), IN_FILE) == ["offset", "key"]
    assert parquet_columns(("key",), window, IN_FILE) == ["offset", "timestamp", "key"]
    assert parquet_columns(None, window, IN_FILE) is None  # every column anyway


def test_row_groups_inside_the_bounds_decode_only_the_wanted_columns() -> None:
    """No per-row comparison is made there, so offset and timestamp are decoded only when
    the query wants them (or when nothing else would carry the row count)."""
    window = Bounds(ts_lo=5, ts_hi=9)
    assert parquet_columns(("key", "timestamp"), window, IN_FILE, filtering=False) == [
        "timestamp",
        "key",
    ]
    assert parquet_columns(("value",), window, IN_FILE, filtering=False) == ["value"]
    assert parquet_columns(("topic", "partition"), Bounds(), IN_FILE, filtering=False) == ["offset"]
