"""`tierlog produce`: stdin's lines as records, like kafka-console-producer (and kcat -P):
an optional key per line (--key-sep), headers on every record (-H NAME=VALUE)."""

from __future__ import annotations

import argparse
import base64
import sys
from typing import Any

from logformat.errors import ErrorCode, TierlogError
from tierlog.cli.topics_cmd import admin_for
from tierlog.client import Admin


def add_produce(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "produce", parents=[common], help="produce lines from stdin, one record each"
    )
    p.add_argument("topic")
    p.add_argument("--key-sep", default=None, help="split each line into KEY<sep>VALUE")
    p.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header on every record (repeatable)",
    )
    p.add_argument("--partition", type=int, default=None)
    p.add_argument("--acks", default="all", choices=["all", "1", "0"])
    p.add_argument("--batch-size", type=int, default=500, help="records per request")
    p.set_defaults(func=run_produce)


def _headers(pairs: list[str]) -> list[list[str]]:
    """-H NAME=VALUE pairs as the API's header list (order kept, names may repeat)."""
    headers = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise TierlogError(ErrorCode.INVALID_RECORD, f"--header wants NAME=VALUE, got {pair!r}")
        headers.append([name, value])
    return headers


def run_produce(args: argparse.Namespace) -> int:
    headers = _headers(args.header)
    with admin_for(args) as admin:
        sent = _produce_lines(admin, args, headers)
    print(f"produced {sent} record(s) to {args.topic}", file=sys.stderr)
    return 0


def _record(line: bytes, number: int, args: argparse.Namespace) -> dict[str, Any]:
    record: dict[str, Any] = {}
    if args.key_sep is not None:
        key, sep, value = line.partition(args.key_sep.encode())
        if not sep:
            raise TierlogError(
                ErrorCode.INVALID_RECORD, f"line {number} has no key separator {args.key_sep!r}"
            )
        record["key_b64"] = base64.b64encode(key).decode()
        line = value
    record["value_b64"] = base64.b64encode(line).decode()
    if args.partition is not None:
        record["partition"] = args.partition
    return record


def _produce_lines(admin: Admin, args: argparse.Namespace, headers: list[list[str]]) -> int:
    """Post stdin's lines, --batch-size records per request; the number of records sent."""
    batch: list[dict[str, Any]] = []
    sent = 0

    def flush() -> None:
        nonlocal sent
        if batch:
            admin.produce_json(args.topic, batch, acks=args.acks)
            sent += len(batch)
            batch.clear()

    for raw in sys.stdin.buffer:
        record = _record(raw.rstrip(b"\r\n"), sent + len(batch) + 1, args)
        if headers:
            record["headers"] = headers
        batch.append(record)
        if len(batch) >= args.batch_size:
            flush()
    flush()
    return sent
