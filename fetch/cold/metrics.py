"""Prometheus metrics of cold reads (brokers and fetch nodes alike; distinct names, so one
process may host several roles on the default registry)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

GET_REQUESTS = Counter(
    "tierlog_cold_get_requests_total",
    "Ranged GETs sent to the object store, by purpose (demand, prefetch, footer)",
    ["kind"],
)
GET_BYTES = Counter(
    "tierlog_cold_read_bytes_total", "Bytes read from the object store, by purpose", ["kind"]
)
GET_ERRORS = Counter("tierlog_cold_get_errors_total", "Failed ranged GETs")
CACHE_HITS = Counter(
    "tierlog_cold_cache_hits_total",
    "Lookups answered from memory (or an in-flight read), by cache (range, footer, row_group)",
    ["cache"],
)
CACHE_MISSES = Counter(
    "tierlog_cold_cache_misses_total", "Lookups that had to read, by cache", ["cache"]
)
CACHE_BYTES = Gauge("tierlog_cold_cache_bytes", "Bytes held by a cache", ["cache"])
PREFETCH_BYTES = Counter(
    "tierlog_cold_prefetch_bytes_total", "Bytes fetched ahead of sequential readers"
)
PREFETCH_USED_BYTES = Counter(
    "tierlog_cold_prefetch_used_bytes_total", "Prefetched bytes a reader asked for afterwards"
)
PREFETCH_SKIPPED = Counter(
    "tierlog_cold_prefetch_skipped_total", "Prefetches not started: the memory budget was full"
)
COLD_RECORDS = Counter(
    "tierlog_cold_fetch_records_total", "Records served from cold files", ["topic"]
)
COLD_FETCHES = Counter("tierlog_cold_fetches_total", "Fetch requests served from cold files")
DECODE_SECONDS = Histogram(
    "tierlog_cold_decode_seconds",
    "Time to decode one Parquet row group",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
MANIFEST_QUERIES = Counter(
    "tierlog_cold_manifest_queries_total", "Manifest lookups sent to Postgres", ["query"]
)
PROXIED = Counter(
    "tierlog_fetch_node_proxied_total",
    "Requests a fetch node handed to a broker, by target (follower, leader, any)",
    ["target"],
)
DEPENDENCY_TIMEOUTS = Counter(
    "tierlog_cold_dependency_timeouts_total",
    "Cold-read waits on Postgres or S3 given up at their deadline",
    ["dependency"],
)
FAILOVERS = Counter(
    "tierlog_fetch_node_replica_failovers_total",
    "Hot reads passed on to the next replica after a KAFKA_STORAGE_ERROR (e.g. a corrupt copy)",
    ["target"],
)
SEARCH_ROW_GROUPS = Counter(
    "tierlog_cold_search_row_groups_total",
    "Row groups a search considered: read, or pruned by their statistics",
    ["outcome"],
)
SEARCH_FILES = Counter("tierlog_cold_search_files_total", "Cold files a search scanned")
