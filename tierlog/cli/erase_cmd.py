"""`tierlog erase TOPIC --key K [--key-file F] [--wait]`: erase every record with these keys
from both tiers (POST /topics/{t}/erasures, issue 31); `tierlog erasures TOPIC [ID]` shows
the audit trail. With --wait the command returns once the request is done (exit 0) or failed
(exit 1, with why)."""

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


def add_erase(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "erase",
        parents=[common],
        help="erase every record with the given keys, hot and cold",
        description="Erase every record with the given keys from every replica and from S3 "
        "(records produced with them later are kept). Needs DELETE on the topic.",
    )
    p.add_argument("topic")
    p.add_argument("--key", action="append", default=[], help="a key (UTF-8); repeatable")
    p.add_argument(
        "--key-b64", action="append", default=[], help="a binary key as base64; repeatable"
    )
    p.add_argument("--key-file", help="a file of keys, one UTF-8 key per line")
    p.add_argument(
        "--wait",
        type=float,
        nargs="?",
        const=3600.0,
        default=0.0,
        metavar="SECONDS",
        help="wait until the erasure is done (up to SECONDS, default 3600)",
    )
    p.add_argument("--output", choices=["text", "json"], default="text")
    p.set_defaults(func=_erase)
    s = sub.add_parser(
        "erasures", parents=[common], help="a topic's erasure requests (the audit trail)"
    )
    s.add_argument("topic")
    s.add_argument("id", nargs="?", help="one request")
    s.add_argument("--output", choices=["text", "json"], default="text")
    s.set_defaults(func=_show)


def _keys(args: argparse.Namespace) -> dict[str, list[str]]:
    text = list(args.key)
    if args.key_file:
        with open(args.key_file, encoding="utf-8") as f:
            text += [line.rstrip("\r\n") for line in f if line.rstrip("\r\n")]
    body: dict[str, list[str]] = {"keys": text}
    if args.key_b64:
        body["keys_b64"] = list(args.key_b64)
    return body


def line(doc: dict[str, Any]) -> str:
    out = f"erasure {doc['id']} of {doc['topic']}: {doc['state']} ({doc['keys']} key(s))"
    if doc["state"] == "failed":
        out += f": {doc['error']}"
    if doc["state"] == "done":
        hot = sum(r.get("records_removed", 0) for r in doc["hot"].values())
        files = sum(r.get("files_rewritten", 0) for r in doc["cold"].values())
        cold_bytes = sum(r.get("bytes_rewritten", 0) for r in doc["cold"].values())
        cold = sum(r.get("records_removed", 0) for r in doc["cold"].values())
        out += (
            f"; hot: {hot} record(s) removed over all replicas; cold: {cold} record(s) "
            f"removed, {files} file(s) ({size(cold_bytes)}) rewritten"
        )
    return out


def wait_for_end(admin: Admin, topic: str, erasure_id: str, seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    path = f"{topic_path(topic)}/erasures/{erasure_id}"
    while True:
        doc: dict[str, Any] = admin.call("GET", path)
        if doc["state"] in ("done", "failed"):
            return doc
        if time.monotonic() >= deadline:
            raise TierlogError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"after {seconds:g} s erasure {erasure_id} is still {doc['state']} "
                f"(see `tierlog erasures {topic} {erasure_id}`)",
            )
        time.sleep(WAIT_EVERY_S)


def _print(doc: dict[str, Any], output: str) -> None:
    if output == "json":
        print_json(doc)
    else:
        sys.stdout.write(line(doc) + "\n")


def _erase(args: argparse.Namespace) -> int:
    body = _keys(args)
    with admin_for(args) as admin:
        doc = admin.call("POST", f"{topic_path(args.topic)}/erasures", body)
        if args.wait > 0:
            doc = wait_for_end(admin, args.topic, doc["id"], args.wait)
    _print(doc, args.output)
    return 1 if doc["state"] == "failed" else 0


def _show(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        path = f"{topic_path(args.topic)}/erasures"
        if args.id:
            _print(admin.call("GET", f"{path}/{args.id}"), args.output)
            return 0
        docs = admin.call("GET", path)["erasures"]
    if args.output == "json":
        print_json(docs)
    else:
        sys.stdout.write("".join(line(d) + "\n" for d in docs))
    return 0
