"""The fixed Arrow schema of records inside a frame (docs/design.md §3) and of cold Parquet rows
(§4)."""

from __future__ import annotations

import pyarrow as pa

TIMESTAMP = pa.timestamp("ms", tz="UTC")
HEADER_STRUCT = pa.struct([pa.field("key", pa.string(), nullable=False), ("value", pa.binary())])
HEADERS = pa.list_(pa.field("item", HEADER_STRUCT))

# What a frame's payload holds: one RecordBatch of this schema, offsets relative to the frame.
RECORD_SCHEMA = pa.schema(
    [
        pa.field("offset_delta", pa.int32(), nullable=False),
        pa.field("timestamp", TIMESTAMP, nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADERS),
    ]
)

# What consumers see: absolute offsets (the cold tier's Parquet columns, and fetch results).
CONSUMER_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", TIMESTAMP, nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADERS),
    ]
)
