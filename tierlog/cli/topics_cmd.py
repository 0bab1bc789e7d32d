"""`tierlog topics create|list|describe|alter|delete`, like kafka-topics.

`describe` prints kafka-topics --describe's layout (a topic line, then a line per partition,
with tierlog's offsets and tiers beside Kafka's fields); `--output json` prints the API's
document instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from logformat.errors import ErrorCode, TierlogError
from tierlog.cli.credentials import creds
from tierlog.client import Admin, NetworkError


def add_topics(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    topics = sub.add_parser(
        "topics",
        help="create, list, describe, alter, delete topics",
        description="Topics: create, list, describe, alter (configs), delete.",
    )
    tsub = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    c = tsub.add_parser("create", parents=[common], help="create a topic")
    c.add_argument("name")
    c.add_argument("--partitions", type=int, default=None, help="default: num.partitions")
    c.add_argument(
        "--replication-factor", type=int, default=None, help="default: the brokers' default"
    )
    c.add_argument("--config", action="append", default=[], metavar="NAME=VALUE", help="repeatable")
    c.add_argument("--if-not-exists", action="store_true", help="an existing topic is no error")
    c.set_defaults(func=_create)
    ls = tsub.add_parser("list", parents=[common], help="every topic with its partition count")
    ls.set_defaults(func=_list)
    d = tsub.add_parser(
        "describe", parents=[common], help="partitions: leader, replicas, ISR, offsets, tiers"
    )
    d.add_argument("name")
    d.add_argument(
        "--output", choices=["text", "json"], default="text", help="json: the API's document"
    )
    d.set_defaults(func=_describe)
    a = tsub.add_parser(
        "alter",
        parents=[common],
        help="set configs (--config NAME=VALUE) or reset them to the default (--config NAME=)",
        description="Set configs with --config NAME=VALUE (or bare NAME=VALUE after the "
        "topic); --config NAME= restores a config's default. Repeatable.",
    )
    a.add_argument("name")
    a.add_argument("pairs", nargs="*", metavar="NAME=VALUE", help="as --config NAME=VALUE")
    a.add_argument("--config", action="append", default=[], metavar="NAME=VALUE", help="repeatable")
    a.set_defaults(func=_alter)
    rm = tsub.add_parser("delete", parents=[common], help="delete a topic and its records")
    rm.add_argument("name")
    rm.set_defaults(func=_delete)


def _configs(pairs: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise TierlogError(ErrorCode.INVALID_CONFIG, f"--config wants NAME=VALUE, got {pair!r}")
        out[name.strip()] = value if value != "" else None
    return out


def print_json(doc: Any) -> None:
    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")


@contextmanager
def admin_for(args: argparse.Namespace) -> Iterator[Admin]:
    """An Admin making one attempt per call: a command reports an unreachable node at once."""
    with Admin(args.url, retry=False, **creds(args)) as admin:
        try:
            yield admin
        except NetworkError as exc:
            cause = exc.__cause__ or exc
            raise TierlogError(
                ErrorCode.REQUEST_TIMED_OUT, f"cannot reach {args.url}: {cause}"
            ) from exc


def check_reachable(args: argparse.Namespace) -> None:
    """One GET /healthz, no retries: for commands whose client retries a refused connection
    until its timeout, so that a node that is not there is said at once."""
    with admin_for(args) as admin:
        admin.call("GET", "/healthz")


def _create(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        try:
            topic = admin.create_topic(
                args.name, args.partitions, args.replication_factor, _configs(args.config)
            )
        except TierlogError as exc:
            if not (args.if_not_exists and exc.code is ErrorCode.TOPIC_ALREADY_EXISTS):
                raise
            topic = admin.describe_topic(args.name)
            print(f"topic {topic.name} exists with {len(topic.partitions)} partition(s)")
            return 0
    print(f"created topic {topic.name} with {len(topic.partitions)} partition(s)")
    return 0


def _list(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        topics = admin.list_topics()
    for t in topics:
        print(f"{t.name}\tpartitions={t.partitions}\treplication_factor={t.replication_factor}")
    return 0


def _ids(values: list[int] | None) -> str:
    return ",".join(str(v) for v in values or [])


def _range(tier: dict[str, int] | None) -> str:
    return f"{tier['start']}-{tier['end']}" if tier else "-"


def _show(value: object) -> str:
    return "none" if value is None else str(value)


def size(n: float) -> str:
    """Bytes as a person reads them: 0 B, 900 B, 1.5 KiB, 12.0 MiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def in_s3(p: dict[str, Any], tiering: bool) -> str:
    """How much of a partition the cold tier (S3) holds: `1200 of 2000 records, 1.1 MiB`."""
    if not tiering:
        return "- (remote.storage.enable=false)"
    start, hw, cold = p["log_start_offset"], p["high_watermark"], p["cold"]
    if start is None or hw is None:
        return "?"
    records = max(0, hw - start)
    tiered = max(0, min(cold["end"], hw) - max(cold["start"], start)) if cold else 0
    cold_bytes = p.get("cold_bytes")
    return f"{tiered} of {records} records, " + ("?" if cold_bytes is None else size(cold_bytes))


def describe_lines(doc: dict[str, Any]) -> list[str]:
    """kafka-topics --describe's lines for the API's topic document."""
    configs = ",".join(f"{k}={v}" for k, v in sorted(doc["configs"].items()) if v is not None)
    lines = [
        f"Topic: {doc['name']}\tTopicId: {doc['id']}\tPartitionCount: {len(doc['partitions'])}"
        f"\tReplicationFactor: {doc['replication_factor']}\tConfigs: {configs}"
    ]
    tiering = doc["configs"].get("remote.storage.enable") == "true"
    for p in doc["partitions"]:
        lines.append(
            f"\tTopic: {doc['name']}\tPartition: {p['partition']}\tLeader: {_show(p['leader'])}"
            f"\tReplicas: {_ids(p['replicas'])}\tIsr: {_ids(p['isr'])}"
            f"\tLogStartOffset: {_show(p['log_start_offset'])}"
            f"\tHighWatermark: {_show(p['high_watermark'])}"
            f"\tHot: {_range(p['hot'])}\tCold: {_range(p['cold'])}"
            f"\tTieringLag: {_show(p['tiering_lag'])}\tInS3: {in_s3(p, tiering)}"
        )
    return lines


def _describe(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        doc = admin.describe_topic_json(args.name)
    if args.output == "json":
        print_json(doc)
    else:
        print("\n".join(describe_lines(doc)))
    return 0


def _alter(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        configs = _configs([*args.pairs, *args.config])
        if not configs:
            raise TierlogError(
                ErrorCode.INVALID_CONFIG, "nothing to alter: give --config NAME=VALUE"
            )
        print_json(admin.alter_configs_json(args.name, configs))
    return 0


def _delete(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        admin.delete_topic(args.name)
    print(f"deleted topic {args.name}")
    return 0
