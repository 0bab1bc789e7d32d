"""The topic's rules for the records a produce stores, whichever protocol carried them:
keys on compacted topics, header bounds (headers.py), timestamps (timestamps.py), and the
broker's time stamped under LogAppendTime."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ingest.data_limits import DEFAULT_LIMITS, DataLimits
from ingest.service.headers import check_header_column
from ingest.service.timestamps import check_timestamps
from logformat.errors import ErrorCode, TierlogError
from logformat.schema import RECORD_SCHEMA, TIMESTAMP
from metadata.configs import TopicConfig


def _log_append_time(batch: pa.RecordBatch, now_ms: int) -> pa.RecordBatch:
    column = pa.repeat(pa.scalar(now_ms, TIMESTAMP), batch.num_rows)
    return batch.set_column(1, RECORD_SCHEMA.field("timestamp"), column)


def checked_records(
    batch: pa.RecordBatch, config: TopicConfig, now_ms: int, limits: DataLimits = DEFAULT_LIMITS
) -> pa.RecordBatch:
    """The batch (RECORD_SCHEMA) as the topic stores it, or the first rule it breaks.

    A compacted topic keeps the latest record per key: a record without one has no place
    in it (Kafka rejects it the same way)."""
    if config.compact and batch.column(2).null_count:
        raise TierlogError(
            ErrorCode.INVALID_RECORD,
            "compacted topic (cleanup.policy=compact) cannot accept a record without a key",
        )
    check_header_column(batch.column(4), limits)
    stamps = np.asarray(batch.column(1).cast(pa.int64()).fill_null(now_ms).to_numpy(), np.int64)
    check_timestamps(stamps, config, now_ms)
    if config.message_timestamp_type == "LogAppendTime":
        return _log_append_time(batch, now_ms)
    return batch
