"""`tierlog groups list | describe G | reset-offsets G --topic T --to-… | delete G`."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from tierlog.cli.credentials import creds
from tierlog.cli.topics_cmd import check_reachable
from tierlog.client import Admin


def add_groups(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    groups = sub.add_parser(
        "groups", help="list, describe, delete consumer groups; reset their offsets"
    )
    gsub = groups.add_subparsers(dest="action", required=True)
    ls = gsub.add_parser("list", parents=[common])
    ls.set_defaults(func=_list)
    d = gsub.add_parser("describe", parents=[common], help="members, assignments, offsets, lag")
    d.add_argument("group")
    d.set_defaults(func=_describe)
    r = gsub.add_parser(
        "reset-offsets", parents=[common], help="move an empty group's committed offsets"
    )
    r.add_argument("group")
    r.add_argument("--topic", required=True)
    r.add_argument("--partition", type=int, action="append", default=None, help="repeatable")
    to = r.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument(
        "--to-datetime",
        type=parse_datetime,
        metavar="TS",
        help="ISO 8601 (UTC unless it says otherwise) or milliseconds since the epoch",
    )
    to.add_argument("--to-offset", type=int, metavar="OFFSET")
    r.add_argument("--dry-run", action="store_true", help="show the new offsets, change nothing")
    r.set_defaults(func=_reset)
    rm = gsub.add_parser("delete", parents=[common], help="delete an empty group and its offsets")
    rm.add_argument("group")
    rm.set_defaults(func=_delete)


def parse_datetime(text: str) -> datetime:
    if text.isdigit():
        return datetime.fromtimestamp(int(text) / 1000, tz=UTC)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 datetime or ms: {text!r}") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def format_age(ms: int | None) -> str:
    """A lag in time for people: 850ms, 12.3s, 4m05s, 2h03m, 3d04h ("-": unknown)."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    s = ms // 1000
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _list(args: argparse.Namespace) -> int:
    check_reachable(args)
    with Admin(args.url, **creds(args)) as admin:
        for g in admin.list_groups():
            print(f"{g.name}\tstate={g.state}\tmembers={g.members}\tassignor={g.assignor}")
    return 0


def _describe(args: argparse.Namespace) -> int:
    check_reachable(args)
    with Admin(args.url, **creds(args)) as admin:
        g = admin.describe_group(args.group)
    print(f"group {g.name}: {g.state}, epoch {g.group_epoch}, assignor {g.assignor}")
    owner = {tp: m.member_id for m in g.members for tp in m.assignment}
    print(f"{len(g.members)} member(s)")
    for m in g.members:
        parts = ", ".join(f"{t}-{p}" for t, p in sorted(m.assignment)) or "-"
        print(f"  {m.member_id}\tepoch={m.member_epoch}\ttopics={','.join(m.topics)}\t{parts}")
    print("TOPIC\tPARTITION\tCOMMITTED\tLAG\tLAG-TIME\tMEMBER")
    for tp in sorted(set(g.offsets) | set(owner)):
        o = g.offsets.get(tp)
        committed = str(o.offset) if o is not None else "-"
        lag = str(o.lag) if o is not None and o.lag is not None else "-"
        age = format_age(o.lag_ms if o is not None else None)
        print(f"{tp.topic}\t{tp.partition}\t{committed}\t{lag}\t{age}\t{owner.get(tp, '-')}")
    if g.lag is not None:
        print(f"total lag: {g.lag} record(s), oldest unconsumed {format_age(g.lag_ms)} old")
    return 0


def _reset(args: argparse.Namespace) -> int:
    to: str | int | datetime
    if args.to_earliest:
        to = "earliest"
    elif args.to_latest:
        to = "latest"
    elif args.to_datetime is not None:
        to = args.to_datetime
    else:
        to = args.to_offset
    check_reachable(args)
    with Admin(args.url, **creds(args)) as admin:
        rows = admin.reset_group_offsets(
            args.group, args.topic, to=to, partitions=args.partition, dry_run=args.dry_run
        )
    print("TOPIC\tPARTITION\tPREVIOUS\tNEW")
    for r in sorted(rows):
        previous = "-" if r.previous is None else str(r.previous)
        print(f"{r.topic}\t{r.partition}\t{previous}\t{r.offset}")
    if args.dry_run:
        print("(dry run: nothing changed)")
    return 0


def _delete(args: argparse.Namespace) -> int:
    check_reachable(args)
    with Admin(args.url, **creds(args)) as admin:
        admin.delete_group(args.group)
    print(f"deleted group {args.group}")
    return 0
