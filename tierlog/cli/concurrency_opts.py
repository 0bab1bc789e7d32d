"""Concurrency-limit flags of `tierlog broker` and `tierlog fetch` (cluster/http/admission.py
enforces them): searches per principal and per node, admin requests per node."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cluster.http.admission import ConcurrencyLimits


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(f"TIERLOG_{name}", str(default)) or default)


def add_concurrency_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-searches-per-principal",
        type=int,
        default=_env_int("MAX_SEARCHES_PER_PRINCIPAL", 4),
        help="searches one principal may run at once on this node; more get 429 + Retry-After",
    )
    p.add_argument(
        "--max-searches",
        type=int,
        default=_env_int("MAX_SEARCHES", 16),
        help="searches running at once on this node; more get 429 + Retry-After",
    )
    p.add_argument(
        "--max-admin-requests",
        type=int,
        default=_env_int("MAX_ADMIN_REQUESTS", 4),
        help="topic creates, deletes, config changes and partition adds running at once on "
        "this node (HTTP); more get 429 + Retry-After",
    )


def concurrency_limits(args: argparse.Namespace) -> ConcurrencyLimits:
    from cluster.http.admission import ConcurrencyLimits

    values = (args.max_searches_per_principal, args.max_searches, args.max_admin_requests)
    if min(values) < 1:
        raise SystemExit("tierlog: --max-searches(-per-principal) and --max-admin-requests >= 1")
    return ConcurrencyLimits(*values)
