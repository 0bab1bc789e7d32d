"""Overload-protection flags of `tierlog broker` (ingest/api/limits.py enforces them)."""

from __future__ import annotations

import argparse
import os
from typing import Any


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


def limit_config(args: argparse.Namespace) -> dict[str, Any]:
    """The BrokerConfig fields of these flags."""
    return {
        "max_inflight_bytes": args.max_inflight_bytes,
        "max_long_polls": args.max_long_polls,
        "request_body_timeout_ms": args.request_body_timeout_ms,
    }
