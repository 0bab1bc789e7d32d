"""Client commands: `tierlog topics`, `tierlog produce`, `tierlog consume`."""

from __future__ import annotations

import argparse
import base64
import sys
import time
from typing import Any

import orjson

from logformat.errors import ErrorCode, TierlogError
from tierlog.admin_http import AdminHTTP


def add_client_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], default_url: str
) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=default_url, help=f"any node (default {default_url})")

    topics = sub.add_parser("topics", help="create, list, describe, alter, delete topics")
    tsub = topics.add_subparsers(dest="action", required=True)
    c = tsub.add_parser("create", parents=[common])
    c.add_argument("name")
    c.add_argument("--partitions", type=int, default=None)
    c.add_argument("--replication-factor", type=int, default=None)
    c.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    c.set_defaults(func=_topics_create)
    ls = tsub.add_parser("list", parents=[common])
    ls.set_defaults(func=_topics_list)
    d = tsub.add_parser("describe", parents=[common])
    d.add_argument("name")
    d.set_defaults(func=_topics_describe)
    a = tsub.add_parser("alter", parents=[common], help="set (NAME=VALUE) or reset (NAME=) configs")
    a.add_argument("name")
    a.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    a.set_defaults(func=_topics_alter)
    rm = tsub.add_parser("delete", parents=[common])
    rm.add_argument("name")
    rm.set_defaults(func=_topics_delete)

    p = sub.add_parser(
        "produce", parents=[common], help="produce lines from stdin, one record each"
    )
    p.add_argument("topic")
    p.add_argument("--key-sep", default=None, help="split each line into KEY<sep>VALUE")
    p.add_argument("--partition", type=int, default=None)
    p.add_argument("--acks", default="all", choices=["all", "1", "0"])
    p.add_argument("--batch-size", type=int, default=500, help="records per request")
    p.set_defaults(func=_produce)

    q = sub.add_parser("consume", parents=[common], help="print records to stdout")
    q.add_argument("topic")
    q.add_argument("--partition", type=int, default=None, help="only this partition")
    start = q.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=int, default=None)
    q.add_argument("--max-records", type=int, default=None, help="exit after this many")
    q.add_argument("--timeout-ms", type=int, default=None, help="exit after this long idle")
    q.add_argument("--print-key", action="store_true")
    q.add_argument("--print-offset", action="store_true")
    q.set_defaults(func=_consume)


def _configs(pairs: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise TierlogError(ErrorCode.INVALID_CONFIG, f"--config wants NAME=VALUE, got {pair!r}")
        out[name.strip()] = value if value != "" else None
    return out


def _print(doc: Any) -> None:
    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")


def _topics_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "configs": _configs(args.config)}
    if args.partitions is not None:
        body["partitions"] = args.partitions
    if args.replication_factor is not None:
        body["replication_factor"] = args.replication_factor
    doc = AdminHTTP(args.url).call("POST", "/topics", body)
    print(f"created topic {doc['name']} with {len(doc['partitions'])} partition(s)")
    return 0


def _topics_list(args: argparse.Namespace) -> int:
    for t in AdminHTTP(args.url).call("GET", "/topics")["topics"]:
        print(
            f"{t['name']}\tpartitions={t['partitions']}\treplication_factor={t['replication_factor']}"
        )
    return 0


def _topics_describe(args: argparse.Namespace) -> int:
    _print(AdminHTTP(args.url).call("GET", f"/topics/{args.name}"))
    return 0


def _topics_alter(args: argparse.Namespace) -> int:
    _print(
        AdminHTTP(args.url).call(
            "PATCH", f"/topics/{args.name}/configs", {"configs": _configs(args.config)}
        )
    )
    return 0


def _topics_delete(args: argparse.Namespace) -> int:
    AdminHTTP(args.url).call("DELETE", f"/topics/{args.name}")
    print(f"deleted topic {args.name}")
    return 0


def _produce(args: argparse.Namespace) -> int:
    http = AdminHTTP(args.url)
    batch: list[dict[str, Any]] = []
    sent = 0

    def flush() -> None:
        nonlocal sent
        if batch:
            http.call("POST", f"/topics/{args.topic}/records", {"records": batch}, acks=args.acks)
            sent += len(batch)
            batch.clear()

    for raw in sys.stdin.buffer:
        line = raw.rstrip(b"\r\n")
        record: dict[str, Any] = {}
        if args.key_sep is not None:
            key, sep, value = line.partition(args.key_sep.encode())
            if not sep:
                raise TierlogError(
                    ErrorCode.INVALID_RECORD,
                    f"line {sent + len(batch) + 1} has no key separator {args.key_sep!r}",
                )
            record["key_b64"] = base64.b64encode(key).decode()
            line = value
        record["value_b64"] = base64.b64encode(line).decode()
        if args.partition is not None:
            record["partition"] = args.partition
        batch.append(record)
        if len(batch) >= args.batch_size:
            flush()
    flush()
    print(f"produced {sent} record(s) to {args.topic}", file=sys.stderr)
    return 0


def _consume(args: argparse.Namespace) -> int:
    http = AdminHTTP(args.url, timeout=60)
    topic = http.call("GET", f"/topics/{args.topic}")
    partitions = (
        [args.partition]
        if args.partition is not None
        else [p["partition"] for p in topic["partitions"]]
    )
    positions: dict[int, int] = {}
    for p in partitions:
        if args.offset is not None:
            positions[p] = args.offset
        else:
            at = "earliest" if args.from_beginning else "latest"
            positions[p] = http.call("GET", f"/topics/{args.topic}/partitions/{p}/offsets", at=at)[
                "offset"
            ]
    printed = 0
    idle_since = time.monotonic()
    out = sys.stdout.buffer
    while True:
        got = 0
        for p in partitions:
            wait = 0 if len(partitions) > 1 else 500
            doc = http.call(
                "GET",
                f"/topics/{args.topic}/partitions/{p}/records",
                offset=positions[p],
                wait_ms=wait,
                value_format="base64",
                max_records=1000,
            )
            for r in doc["records"]:
                parts = []
                if args.print_offset:
                    parts.append(f"{p}:{r['offset']}".encode())
                if args.print_key:
                    parts.append(
                        base64.b64decode(r["key_b64"]) if r.get("key_b64") is not None else b"null"
                    )
                parts.append(
                    base64.b64decode(r["value_b64"]) if r.get("value_b64") is not None else b"null"
                )
                out.write(b"\t".join(parts) + b"\n")
                printed += 1
                got += 1
                if args.max_records is not None and printed >= args.max_records:
                    out.flush()
                    return 0
            positions[p] = doc["next_offset"]
        out.flush()
        if got:
            idle_since = time.monotonic()
        elif (
            args.timeout_ms is not None
            and (time.monotonic() - idle_since) * 1000 >= args.timeout_ms
        ):
            return 0
        elif len(partitions) > 1:
            time.sleep(0.2)
