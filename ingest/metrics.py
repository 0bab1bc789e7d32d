"""Prometheus metrics of a broker. One process hosts one broker, so the default registry is used."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

REQUESTS = Counter(
    "tierlog_http_requests_total", "HTTP requests handled", ["route", "method", "status"]
)
REQUEST_SECONDS = Histogram(
    "tierlog_http_request_seconds",
    "HTTP request latency",
    ["route"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
PRODUCED_RECORDS = Counter("tierlog_produce_records_total", "Records appended", ["topic"])
PRODUCED_BYTES = Counter("tierlog_produce_bytes_total", "Frame bytes appended", ["topic"])
PRODUCE_ERRORS = Counter(
    "tierlog_produce_errors_total", "Rejected produce requests", ["error_code"]
)
FETCHED_RECORDS = Counter("tierlog_fetch_records_total", "Records served to consumers", ["topic"])
GROUP_COMMIT_FRAMES = Histogram(
    "tierlog_group_commit_frames",
    "Frames written per coalesced log write",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)
LOG_END_OFFSET = Gauge("tierlog_log_end_offset", "Next offset to assign", ["topic", "partition"])
HIGH_WATERMARK = Gauge("tierlog_high_watermark", "High watermark", ["topic", "partition"])
LOG_START_OFFSET = Gauge("tierlog_log_start_offset", "Log start offset", ["topic", "partition"])
PARTITIONS_LED = Gauge("tierlog_partitions_led", "Partitions this broker leads")
# Kafka's OfflineReplicaCount: hosted partitions whose log went offline (a storage error).
OFFLINE_PARTITIONS = Gauge(
    "tierlog_offline_replicas",
    "Hosted partitions whose log is offline after a storage error",
)
CORRUPT_FRAMES = Counter(
    "tierlog_corrupt_frame_reads_total",
    "Reads that met a stored frame failing its CRC or offset check (not served)",
    ["topic", "partition"],
)
CORRUPT_REPAIRS = Counter(
    "tierlog_corrupt_frame_repairs_total",
    "Follower truncations below a corrupt frame, to fetch it again from the leader",
    ["topic", "partition"],
)

# Tiering, broker side (remote_log_manager.py).
TIERING_LAG = Gauge(
    "tierlog_partition_tiering_lag_records",
    "Committed records of a partition this broker leads not yet in the cold tier (leader view)",
    ["topic", "partition"],
)
HOT_BYTES = Gauge(
    "tierlog_hot_bytes", "Bytes of a partition's segments on this broker", ["topic", "partition"]
)
SEGMENTS_REGISTERED = Counter(
    "tierlog_segments_registered_total", "Sealed segments registered for tiering", ["topic"]
)
LOCAL_RETENTION_DELETED_SEGMENTS = Counter(
    "tierlog_local_retention_deleted_segments_total",
    "Tiered hot segments deleted by local retention",
    ["topic"],
)
LOCAL_RETENTION_DELETED_BYTES = Counter(
    "tierlog_local_retention_deleted_bytes_total",
    "Bytes of tiered hot segments deleted by local retention",
    ["topic"],
)
LOCAL_RETENTION_BLOCKED_BYTES = Gauge(
    "tierlog_local_retention_blocked_bytes",
    "Hot bytes local retention would delete but keeps because they are not tiered yet",
    ["topic", "partition"],
)

# Quotas and overload protection (quota_manager.py, inflight.py, api/limits.py).
QUOTA_THROTTLE_SECONDS = Counter(
    "tierlog_quota_throttle_seconds_total",
    "Throttle time handed to principals over their byte-rate quota (Retry-After), summed",
    ["kind", "principal"],
)
QUOTA_THROTTLED_REQUESTS = Counter(
    "tierlog_quota_throttled_requests_total",
    "Requests refused with 429 because the principal is over its byte-rate quota",
    ["kind", "principal"],
)
QUOTA_ENTITIES = Gauge("tierlog_quota_entities", "Client quota entities in the cached table")
REJECTED_REQUESTS = Counter(
    "tierlog_overload_rejected_requests_total",
    "Requests refused by a broker-wide limit",
    ["reason"],  # inflight_bytes | long_polls | too_large | body_timeout | header_too_large |
    # header_timeout | idle_connection | connections_per_address (ingest/http_guard.py)
)
INFLIGHT_BYTES = Gauge("tierlog_inflight_request_bytes", "Request body bytes being handled")
LONG_POLLS = Gauge("tierlog_long_polls_in_flight", "Long-polling fetches waiting for data")

# Log cleaner: key compaction of the hot tier's sealed segments (log_cleaner.py).
CLEANER_PASSES = Counter(
    "tierlog_log_cleaner_passes_total", "Log cleaner passes that rewrote segments", ["topic"]
)
CLEANER_SEGMENTS = Counter(
    "tierlog_log_cleaner_segments_cleaned_total",
    "Sealed segments recopied by the cleaner",
    ["topic"],
)
CLEANER_BYTES_READ = Counter(
    "tierlog_log_cleaner_bytes_read_total", "Segment bytes the cleaner recopied", ["topic"]
)
CLEANER_BYTES_RECLAIMED = Counter(
    "tierlog_log_cleaner_bytes_reclaimed_total", "Disk bytes the cleaner freed", ["topic"]
)
CLEANER_RECORDS_REMOVED = Counter(
    "tierlog_log_cleaner_records_removed_total",
    "Records the cleaner removed (superseded or expired tombstones)",
    ["topic"],
)
CLEANER_DIRTY_RATIO = Gauge(
    "tierlog_log_cleaner_dirty_ratio",
    "Dirty share of a partition's cleanable bytes (the cleaner's lag)",
    ["topic", "partition"],
)
