"""Prometheus metrics of the HTTP layer every node serves through: requests, quotas and
overload protection. One process hosts one node, so the default registry is used."""

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

# Quotas and overload protection (http/quota_manager.py, http/inflight.py, http/limits.py).
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
    # header_timeout | idle_connection | connections_per_address (cluster/http/guard.py) |
    # untiered_bytes (produce waiting for tiering: ingest/tiered/untiered_bound.py)
)
INFLIGHT_BYTES = Gauge("tierlog_inflight_request_bytes", "Request body bytes being handled")
LONG_POLLS = Gauge("tierlog_long_polls_in_flight", "Long-polling fetches waiting for data")
