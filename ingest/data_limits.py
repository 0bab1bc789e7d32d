"""The knobs of the data-path rules in ingest/service/, shared by HTTP and Kafka, beside
BrokerConfig's expansion limits (max_request_*): headers, fetch size, entries per request.
Defaults and flags are listed in docs/limits.md ("Kafka listener")."""

from __future__ import annotations

from typing import Any, NamedTuple

from ingest.settings import DATA_LIMITS

# The defaults are the settings table's (ingest/settings.py).
_DEFAULT: dict[str, Any] = {s.name: s.default for s in DATA_LIMITS}
# Kafka's fetch.max.bytes default (55 MiB): the most one Fetch answers, whatever it asks.
FETCH_MAX_BYTES: int = _DEFAULT["fetch_max_bytes"]


class DataLimits(NamedTuple):
    # Record headers (ingest/service/headers.py), checked before any header is walked.
    max_headers_per_record: int = _DEFAULT["max_headers_per_record"]
    max_headers_per_batch: int = _DEFAULT["max_headers_per_batch"]
    max_header_bytes_per_record: int = _DEFAULT["max_header_bytes_per_record"]
    max_header_bytes_per_batch: int = _DEFAULT["max_header_bytes_per_batch"]
    # Fetch (ingest/service/fetch_rules.py): Kafka's fetch.max.bytes.
    fetch_max_bytes: int = _DEFAULT["fetch_max_bytes"]
    # Entries one request may name (ingest/service/request_counts.py).
    max_create_topics: int = _DEFAULT["max_create_topics"]
    max_metadata_topics: int = _DEFAULT["max_metadata_topics"]
    max_fetch_partitions: int = _DEFAULT["max_fetch_partitions"]
    max_list_offsets_partitions: int = _DEFAULT["max_list_offsets_partitions"]


DEFAULT_LIMITS = DataLimits()
