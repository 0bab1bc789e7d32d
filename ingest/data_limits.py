"""The knobs of the data-path rules in ingest/service/, shared by HTTP and Kafka, beside
BrokerConfig's expansion limits (max_request_*): headers, fetch size, entries per request.
Defaults and flags are listed in docs/limits.md ("Kafka listener")."""

from __future__ import annotations

from typing import NamedTuple

# Kafka's fetch.max.bytes default (55 MiB): the most one Fetch answers, whatever it asks.
FETCH_MAX_BYTES = 55 * 1024 * 1024


class DataLimits(NamedTuple):
    # Record headers (ingest/service/headers.py), checked before any header is walked.
    max_headers_per_record: int = 1_000
    max_headers_per_batch: int = 100_000
    max_header_bytes_per_record: int = 1024 * 1024
    max_header_bytes_per_batch: int = 16 * 1024 * 1024
    # Fetch (ingest/service/fetch_rules.py): Kafka's fetch.max.bytes.
    fetch_max_bytes: int = FETCH_MAX_BYTES
    # Entries one request may name (ingest/service/request_counts.py).
    max_create_topics: int = 1_000
    max_metadata_topics: int = 10_000
    max_fetch_partitions: int = 10_000
    max_list_offsets_partitions: int = 10_000


DEFAULT_LIMITS = DataLimits()
