"""Flags of `tierlog broker` for the data-path rules both protocols share (ingest/service/):
record headers, the fetch response cap, entries per Kafka request. docs/limits.md lists them
with their defaults; each also reads TIERLOG_<NAME> (e.g. TIERLOG_FETCH_MAX_BYTES)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.data_limits import DataLimits

# flag -> (DataLimits field, help); the defaults are DataLimits' own.
_FLAGS: dict[str, tuple[str, str]] = {
    "--max-headers-per-record": (
        "max_headers_per_record",
        "headers on one record (Kafka and HTTP produce); more gets INVALID_RECORD / 400",
    ),
    "--max-headers-per-batch": (
        "max_headers_per_batch",
        "headers on all records of one batch (Kafka) or request (HTTP)",
    ),
    "--max-header-bytes-per-record": (
        "max_header_bytes_per_record",
        "bytes of one record's headers (keys and values)",
    ),
    "--max-header-bytes-per-batch": (
        "max_header_bytes_per_batch",
        "bytes of all headers of one batch (Kafka) or request (HTTP)",
    ),
    "--fetch-max-bytes": (
        "fetch_max_bytes",
        "the most one fetch answers, whatever it asks (Kafka's fetch.max.bytes); HTTP's "
        "max_bytes is lowered to it too",
    ),
    "--kafka-max-create-topics": (
        "max_create_topics",
        "topics in one CreateTopics request; more: INVALID_REQUEST, none created",
    ),
    "--kafka-max-metadata-topics": (
        "max_metadata_topics",
        "topics named in one Metadata request (asking for all is not bounded)",
    ),
    "--kafka-max-fetch-partitions": (
        "max_fetch_partitions",
        "partitions in one Fetch request",
    ),
    "--kafka-max-list-offsets-partitions": (
        "max_list_offsets_partitions",
        "partitions in one ListOffsets request",
    ),
}


def _env_name(flag: str) -> str:
    return "TIERLOG_" + flag.removeprefix("--").replace("-", "_").upper()


def add_data_limit_flags(p: argparse.ArgumentParser) -> None:
    """The flags, unresolved: their defaults are DataLimits' own, read only when a broker
    starts (data_limits), so no other command loads the broker's package to parse its
    arguments."""
    for flag, (dest, text) in _FLAGS.items():
        p.add_argument(flag, dest=dest, type=int, default=None, help=f"{text} (docs/limits.md)")


def data_limits(args: argparse.Namespace) -> DataLimits:
    """The flags given, else TIERLOG_<FLAG>, else DataLimits' defaults."""
    from ingest.data_limits import DataLimits

    given: dict[str, int] = {}
    for flag, (dest, _) in _FLAGS.items():
        value = getattr(args, dest)
        if value is None and os.environ.get(_env_name(flag)):
            value = int(os.environ[_env_name(flag)])
        if value is not None:
            given[dest] = value
    return DataLimits(**given)
