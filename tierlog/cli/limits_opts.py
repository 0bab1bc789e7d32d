"""Overload-protection flags of `tierlog broker` (cluster/http/limits.py enforces them) and the
HTTP connection limits of brokers and fetch nodes (cluster/http/guard.py)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from tierlog.cli.data_limit_opts import add_data_limit_flags, data_limits

if TYPE_CHECKING:
    from cluster.http.guard import HttpLimits


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(f"TIERLOG_{name}", str(default)) or default)


def add_limit_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-inflight-bytes",
        type=int,
        default=_env_int("MAX_INFLIGHT_BYTES", 256 * 1024 * 1024),
        help="request body bytes handled at once; more waits 1 s, then 503 + Retry-After "
        "(Kafka's queued.max.request.bytes)",
    )
    p.add_argument(
        "--max-long-polls",
        type=int,
        default=_env_int("MAX_LONG_POLLS", 1024),
        help="fetches waiting for data at once (wait_ms > 0); more get 503 + Retry-After",
    )
    p.add_argument(
        "--request-body-timeout-ms",
        type=int,
        default=_env_int("REQUEST_BODY_TIMEOUT_MS", 30_000),
        help="a request body must arrive within this, else 408 and the connection is closed",
    )
    p.add_argument(
        "--max-untiered-bytes",
        type=int,
        default=_env_int("MAX_UNTIERED_BYTES", 8 * 1024**3),
        help="sealed bytes on this broker not yet copied to the cold tier; above it, client "
        "produce to the lagging partitions gets 503 THROTTLING_QUOTA_EXCEEDED + Retry-After "
        "until tiering catches up (0: no bound)",
    )
    add_expansion_flags(p)
    add_data_limit_flags(p)


def add_expansion_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-request-records",
        type=int,
        default=_env_int("MAX_REQUEST_RECORDS", 1_000_000),
        help="records in one produce request (Arrow or JSON), counted before decoding; "
        "more gets 413 RECORD_LIST_TOO_LARGE",
    )
    p.add_argument(
        "--max-request-decoded-bytes",
        type=int,
        default=_env_int("MAX_REQUEST_DECODED_BYTES", 128 * 1024 * 1024),
        help="what an Arrow produce body may decode to (decompressed, dictionaries expanded); "
        "more gets 413 MESSAGE_TOO_LARGE",
    )
    p.add_argument(
        "--max-compression-ratio",
        type=float,
        default=float(os.environ.get("TIERLOG_MAX_COMPRESSION_RATIO", "100") or 100),
        help="decoded size / body size of a produce request decoding to over 1 MiB; "
        "more gets 413 MESSAGE_TOO_LARGE",
    )


def limit_config(args: argparse.Namespace) -> dict[str, Any]:
    """The BrokerConfig fields of these flags."""
    return {
        "max_inflight_bytes": args.max_inflight_bytes,
        "max_long_polls": args.max_long_polls,
        "request_body_timeout_ms": args.request_body_timeout_ms,
        "max_untiered_bytes": args.max_untiered_bytes,
        "max_request_records": args.max_request_records,
        "max_request_decoded_bytes": args.max_request_decoded_bytes,
        "max_compression_ratio": args.max_compression_ratio,
        "data_limits": data_limits(args),
    }


def add_http_flags(p: argparse.ArgumentParser) -> None:
    """Connection limits, checked while a request's headers are parsed (before auth)."""
    p.add_argument(
        "--max-header-bytes",
        type=int,
        default=_env_int("MAX_HEADER_BYTES", 32 * 1024),
        help="request line and headers together; more gets 431 and the connection is closed",
    )
    p.add_argument(
        "--max-headers",
        type=int,
        default=_env_int("MAX_HEADERS", 100),
        help="header fields in one request; more gets 431 and the connection is closed",
    )
    p.add_argument(
        "--header-timeout-ms",
        type=int,
        default=_env_int("HEADER_TIMEOUT_MS", 10_000),
        help="a new connection or request must send its whole head within this, else 408 "
        "(or, if it sent nothing, a silent close)",
    )
    p.add_argument(
        "--idle-timeout-ms",
        type=int,
        default=_env_int("IDLE_TIMEOUT_MS", 5000),
        help="a keep-alive connection idle this long between requests is closed",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=_env_int("MAX_CONNECTIONS", 4096),
        help="open connections (and requests) at once; more get 503, except /healthz and "
        "/readyz, which keep a small reserve",
    )
    p.add_argument(
        "--max-connections-per-address",
        type=int,
        default=_env_int("MAX_CONNECTIONS_PER_ADDRESS", 512),
        help="open connections from one client IP address; more get 429 and are closed",
    )


def http_limits(args: argparse.Namespace) -> HttpLimits:
    from cluster.http.guard import HttpLimits

    return HttpLimits(
        max_header_bytes=args.max_header_bytes,
        max_headers=args.max_headers,
        header_timeout_s=args.header_timeout_ms / 1000,
        idle_timeout_s=args.idle_timeout_ms / 1000,
        max_connections=args.max_connections,
        max_connections_per_address=args.max_connections_per_address,
    )
