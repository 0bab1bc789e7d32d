"""`tierlog consume`: print a topic's records to stdout, like kafka-console-consumer.

Without --group it reads the partitions directly (all, or --partition) from the end, the
beginning (--from-beginning) or --offset; with --group it joins that consumer group and
commits what it printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import BinaryIO

from tierlog.cli.credentials import creds
from tierlog.client import Consumer, ConsumerRecord, TopicPartition


def add_consume(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    q = sub.add_parser("consume", parents=[common], help="print records to stdout")
    q.add_argument("topic")
    q.add_argument("--group", default=None, help="consume as a member of this group")
    q.add_argument(
        "--partition",
        type=int,
        action="append",
        default=None,
        help="only this partition (repeatable; not with --group)",
    )
    start = q.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset when there is no committed one",
    )
    start.add_argument("--offset", type=int, default=None, help="start at this offset")
    q.add_argument(
        "--max-messages",
        "--max-records",
        dest="max_messages",
        type=int,
        default=None,
        help="exit after this many records",
    )
    q.add_argument(
        "--timeout-ms", type=int, default=None, help="exit when no record came for this long"
    )
    q.add_argument(
        "--key-sep",
        default=None,
        help="print KEY<sep>VALUE (implies --print-key; default separator: tab)",
    )
    q.add_argument("--print-key", action="store_true")
    q.add_argument("--print-offset", action="store_true", help="prefix PARTITION:OFFSET<tab>")
    q.set_defaults(func=run_consume)


def _line(record: ConsumerRecord, print_key: bool, key_sep: bytes, print_offset: bool) -> bytes:
    parts = b""
    if print_offset:
        parts += b"%d:%d\t" % (record.partition, record.offset)
    if print_key:
        parts += (record.key if record.key is not None else b"null") + key_sep
    return parts + (record.value if record.value is not None else b"null") + b"\n"


def run_consume(args: argparse.Namespace) -> int:
    if args.group and (args.partition or args.offset is not None):
        print("tierlog consume: --group takes no --partition or --offset", file=sys.stderr)
        return 2
    reset = "earliest" if args.from_beginning else "latest"
    consumer = Consumer(args.url, group_id=args.group, auto_offset_reset=reset, **creds(args))
    try:
        if args.group:
            # A group's subscription to a missing topic would wait for it for ever: fail
            # as the direct read does (UNKNOWN_TOPIC_OR_PARTITION).
            consumer.partitions_for(args.topic)
            consumer.subscribe([args.topic])
        else:
            partitions = args.partition or sorted(consumer.partitions_for(args.topic))
            tps = [TopicPartition(args.topic, p) for p in partitions]
            consumer.assign(tps)
            for tp in tps:
                if args.offset is not None:
                    consumer.seek(tp, args.offset)
        return _print_records(consumer, args, sys.stdout.buffer)
    finally:
        consumer.close()


def _print_records(consumer: Consumer, args: argparse.Namespace, out: BinaryIO) -> int:
    print_key = args.print_key or args.key_sep is not None
    key_sep = (args.key_sep if args.key_sep is not None else "\t").encode()
    printed = 0
    if args.max_messages is not None and args.max_messages <= 0:
        return 0
    idle_since = time.monotonic()
    try:
        while True:
            # Never take more than will be printed: positions (and commits) follow poll().
            left = None if args.max_messages is None else args.max_messages - printed
            records = consumer.poll(0.5, max_records=left)
            if records:
                out.write(
                    b"".join(_line(r, print_key, key_sep, args.print_offset) for r in records)
                )
                out.flush()
                printed += len(records)
                idle_since = time.monotonic()
                if args.max_messages is not None and printed >= args.max_messages:
                    return 0
            elif (
                args.timeout_ms is not None
                and (time.monotonic() - idle_since) * 1000 >= args.timeout_ms
            ):
                return 0
    except BrokenPipeError:  # e.g. `| head`: the reader has all it wanted
        return 0
