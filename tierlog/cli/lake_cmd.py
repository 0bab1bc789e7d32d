"""`tierlog lake describe TOPIC`: the topic's Delta table in S3 (GET /topics/{t}/lake): its
path, version, files, and per partition the offsets, records and bytes it holds. `--wait S`
first waits (up to S seconds) until the table holds every record up to each partition's high
watermark, which is how a newcomer sees a dev run's records arrive in S3."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from logformat.errors import ErrorCode, TierlogError
from tierlog.cli.topics_cmd import admin_for, print_json, size
from tierlog.client import Admin
from tierlog.client.metadata import topic_path

WAIT_EVERY_S = 1.0


def add_lake(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    lake = sub.add_parser(
        "lake",
        help="a topic's Delta table in S3",
        description="A topic's Delta Lake table: where it is, its version and files.",
    )
    lsub = lake.add_subparsers(dest="action", required=True, metavar="ACTION")
    d = lsub.add_parser(
        "describe",
        parents=[common],
        help="table path, version, files, offset ranges per partition, bytes",
    )
    d.add_argument("topic")
    d.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="first wait up to SECONDS until the table holds every record up to the high "
        "watermark (exit 1 if it does not by then)",
    )
    d.add_argument(
        "--output", choices=["text", "json"], default="text", help="json: the API's document"
    )
    d.set_defaults(func=_describe)


def missing(admin: Admin, topic: str) -> list[str]:
    """The partitions whose records the cold tier does not hold up to the high watermark,
    as `partition P: N record(s) not in S3`."""
    doc = admin.describe_topic_json(topic)
    if doc["configs"].get("remote.storage.enable") != "true":
        raise TierlogError(
            ErrorCode.INVALID_CONFIG,
            f"topic {topic!r} has remote.storage.enable=false: nothing of it goes to S3",
        )
    out = []
    for p in doc["partitions"]:
        hw, cold = p["high_watermark"], p["cold"]
        if hw is None:
            out.append(f"partition {p['partition']}: its leader did not answer")
            continue
        start = p["log_start_offset"] or 0
        tiered = cold["end"] if cold else start
        if tiered < hw:
            out.append(f"partition {p['partition']}: {hw - tiered} record(s) not in S3")
    return out


def wait_until_tiered(admin: Admin, topic: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while lagging := missing(admin, topic):
        if time.monotonic() >= deadline:
            raise TierlogError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"after {seconds:g} s, S3 does not hold all of {topic!r} yet: "
                + "; ".join(lagging)
                + " (a segment is tiered once it rolls at segment.ms or segment.bytes)",
            )
        time.sleep(WAIT_EVERY_S)


def describe_lines(doc: dict[str, Any]) -> list[str]:
    totals = doc["totals"]
    lines = [
        f"Topic: {doc['topic']}\tTable: {doc['table_uri']}\tVersion: "
        f"{'none' if doc['version'] is None else doc['version']}\tFiles: {totals['files']}"
        f"\tRecords: {totals['records']}\tSize: {size(totals['size_bytes'])}"
    ]
    if not doc.get("remote_storage_enable", True):
        lines.append("\t(remote.storage.enable=false: this topic is not tiered)")
    for p in doc["partitions"]:
        offsets = (
            f"{p['first_offset']}-{p['last_offset']}" if p["first_offset"] is not None else "-"
        )
        lines.append(
            f"\tPartition: {p['partition']}\tOffsets: {offsets}\tFiles: {p['files']}"
            f"\tRecords: {p['records']}\tSize: {size(p['size_bytes'])}"
        )
    return lines


def _describe(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        if args.wait > 0:
            wait_until_tiered(admin, args.topic, args.wait)
        doc = admin.call("GET", topic_path(args.topic) + "/lake")
    if args.output == "json":
        print_json(doc)
    else:
        sys.stdout.write("\n".join(describe_lines(doc)) + "\n")
    return 0
