"""Prometheus metrics of the tiering worker (cluster/worker_health.py serves them).

Names are distinct from the broker's, so one process may host both roles on the default
registry (`tierlog dev`).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

LAG_RECORDS = Gauge(
    "tierlog_tiering_lag_records",
    "Records in sealed segments not yet tiered",
    ["topic", "partition"],
)
LAG_BYTES = Gauge(
    "tierlog_tiering_lag_bytes", "Bytes of sealed segments not yet tiered", ["topic", "partition"]
)
LAG_SEGMENTS = Gauge(
    "tierlog_tiering_lag_segments", "Sealed segments not yet tiered", ["topic", "partition"]
)
UPLOADED_BYTES = Counter(
    "tierlog_tiering_uploaded_bytes_total", "Parquet bytes uploaded and committed", ["topic"]
)
UPLOADED_FILES = Counter(
    "tierlog_tiering_uploaded_files_total", "Data files committed to Delta", ["topic"]
)
TIERED_RECORDS = Counter("tierlog_tiering_records_total", "Records tiered", ["topic"])
DOWNLOADED_BYTES = Counter(
    "tierlog_tiering_downloaded_bytes_total", "Segment bytes copied from replicas"
)
BAD_RECORDS = Counter(
    "tierlog_tiering_bad_records_total",
    "Records tiered under the bad-record policy (coldstore/timestamp_policy.py): kept, with "
    "the field the cold tier cannot hold clamped and the original in a header",
    ["topic", "reason"],
)
FAILURES = Counter("tierlog_tiering_failures_total", "Failed tiering attempts", ["step"])
SEGMENT_SECONDS = Histogram(
    "tierlog_tiering_segment_seconds",
    "Time to tier one segment (download to manifest commit)",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
BATCH_SEGMENTS = Histogram(
    "tierlog_tiering_batch_segments",
    "Segments tiered by one Delta commit",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)
UNTYPED_RECORDS = Counter(
    "tierlog_tiering_untyped_records_total",
    "Records of a typed lake table (lake.mode) tiered with a null value_typed: the reason is "
    "in their value_error column (no_schema_id, unknown_schema, decode, type_conflict)",
    ["topic", "reason"],
)
