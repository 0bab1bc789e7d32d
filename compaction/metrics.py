"""Prometheus metrics of the compaction worker (names distinct from tiering's and the broker's,
so `tierlog dev` can host every role on the default registry)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

EXPIRED_FILES = Counter(
    "tierlog_compaction_expired_files_total",
    "Cold files removed by retention.ms / retention.bytes, or below a DeleteRecords start",
    ["topic", "reason"],
)
EXPIRED_RECORDS = Counter(
    "tierlog_compaction_expired_records_total", "Records removed by retention", ["topic"]
)
MERGED_FILES = Counter(
    "tierlog_compaction_merged_files_total", "Small cold files merged into bigger ones", ["topic"]
)
MERGE_OUTPUT_FILES = Counter(
    "tierlog_compaction_merge_output_files_total", "Files written by small-file merges", ["topic"]
)
COMPACTED_RECORDS_IN = Counter(
    "tierlog_compaction_key_records_read_total", "Records read by key compaction", ["topic"]
)
COMPACTED_RECORDS_OUT = Counter(
    "tierlog_compaction_key_records_kept_total", "Records kept by key compaction", ["topic"]
)
REWRITTEN_BYTES = Counter(
    "tierlog_compaction_rewritten_bytes_total",
    "Parquet bytes written by merges and key compaction",
    ["topic", "job"],
)
RECLAIMED_BYTES = Counter(
    "tierlog_compaction_reclaimed_bytes_total",
    "Object bytes deleted from S3 after the grace period",
)
DELETED_OBJECTS = Counter(
    "tierlog_compaction_deleted_objects_total", "Objects deleted from S3 after the grace period"
)
ABORTED_UPLOADS = Counter(
    "tierlog_compaction_aborted_uploads_total", "Abandoned multipart uploads aborted"
)
PURGED_TOPICS = Counter(
    "tierlog_compaction_purged_topics_total", "Deleted topics whose Delta table was deleted"
)
PENDING_DELETE_BYTES = Gauge(
    "tierlog_compaction_pending_delete_bytes", "Bytes of removed files waiting out their grace"
)
COMPACTION_LAG_MS = Gauge(
    "tierlog_compaction_lag_ms",
    "Age of the oldest cold record not yet key-compacted (compacted topics)",
    ["topic", "partition"],
)
DIRTY_RATIO = Gauge(
    "tierlog_compaction_dirty_ratio",
    "Share of a compacted partition's cleanable cold bytes not key-compacted yet",
    ["topic", "partition"],
)
FAILURES = Counter("tierlog_compaction_failures_total", "Failed compaction jobs", ["job"])
JOB_SECONDS = Histogram(
    "tierlog_compaction_job_seconds",
    "Time of one partition job",
    ["job"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
ERASURE_COLD_RECORDS_REMOVED = Counter(
    "tierlog_erasure_cold_records_removed_total", "Records erased from cold files", ["topic"]
)
ERASURE_COLD_FILES_REWRITTEN = Counter(
    "tierlog_erasure_cold_files_rewritten_total", "Cold files erasure rewrote", ["topic"]
)
ERASURE_COLD_BYTES_REWRITTEN = Counter(
    "tierlog_erasure_cold_bytes_rewritten_total",
    "Bytes of the cold files erasure rewrote (their size before)",
    ["topic"],
)
