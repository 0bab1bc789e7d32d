"""Client commands: `tierlog topics`, `produce`, `consume`, `groups`, `replay`.

`consume`, `groups` and `replay` live in their own modules (consume_cmd, groups_cmd,
replay_cmd) and use the Python client (tierlog.client).
"""

from __future__ import annotations

import argparse
import base64
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from logformat.errors import ErrorCode, TierlogError
from tierlog.cli.consume_cmd import add_consume
from tierlog.cli.credentials import add_credentials, creds
from tierlog.cli.groups_cmd import add_groups
from tierlog.cli.replay_cmd import add_replay
from tierlog.client import Admin, NetworkError


def add_client_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], default_url: str
) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=default_url, help=f"any node (default {default_url})")
    add_credentials(common)

    topics = sub.add_parser("topics", help="create, list, describe, alter, delete topics")
    tsub = topics.add_subparsers(dest="action", required=True)
    c = tsub.add_parser("create", parents=[common])
    c.add_argument("name")
    c.add_argument("--partitions", type=int, default=None)
    c.add_argument("--replication-factor", type=int, default=None)
    c.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    c.add_argument("--if-not-exists", action="store_true", help="an existing topic is no error")
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

    add_consume(sub, common)
    add_groups(sub, common)
    add_replay(sub, common)


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


@contextmanager
def _admin(args: argparse.Namespace) -> Iterator[Admin]:
    """An Admin making one attempt per call: a command reports an unreachable node at once."""
    with Admin(args.url, retry=False, **creds(args)) as admin:
        try:
            yield admin
        except NetworkError as exc:
            cause = exc.__cause__ or exc
            raise TierlogError(
                ErrorCode.REQUEST_TIMED_OUT, f"cannot reach {args.url}: {cause}"
            ) from exc


def _topics_create(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
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


def _topics_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        topics = admin.list_topics()
    for t in topics:
        print(f"{t.name}\tpartitions={t.partitions}\treplication_factor={t.replication_factor}")
    return 0


def _topics_describe(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        _print(admin.describe_topic_json(args.name))
    return 0


def _topics_alter(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        _print(admin.alter_configs_json(args.name, _configs(args.config)))
    return 0


def _topics_delete(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        admin.delete_topic(args.name)
    print(f"deleted topic {args.name}")
    return 0


def _produce(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        sent = _produce_lines(admin, args)
    print(f"produced {sent} record(s) to {args.topic}", file=sys.stderr)
    return 0


def _produce_lines(admin: Admin, args: argparse.Namespace) -> int:
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
    return sent
