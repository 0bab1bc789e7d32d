"""`tierlog consume`: print a topic's records to stdout, like kafka-console-consumer and
kcat -C.

Without --group it reads the partitions directly (all, or --partition) from the end, the
beginning (--from-beginning), --offset or --from-timestamp; with --group it joins that
consumer group and commits what it printed. --format prints kcat's format strings
(record_format.py); -e exits once every partition is read up to its end as of then.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import BinaryIO

from logformat.errors import ErrorCode, TierlogError
from tierlog.cli.credentials import creds
from tierlog.cli.record_format import compile_format
from tierlog.cli.topics_cmd import check_reachable
from tierlog.cli.value_format import add_value_format, decoding_printer
from tierlog.client import Consumer, ConsumerRecord, TopicPartition

Printer = Callable[[ConsumerRecord], bytes]


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
    start.add_argument(
        "--from-timestamp",
        default=None,
        metavar="TIME",
        help="start at the first record at or after TIME: ms since the epoch or ISO 8601 "
        "(2024-05-01T12:00:00+00:00); not with --group",
    )
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
        "-e",
        "--exit-at-end",
        action="store_true",
        help="exit once every partition is read to its end (its high watermark when first seen)",
    )
    q.add_argument(
        "--key-sep",
        default=None,
        help="print KEY<sep>VALUE (implies --print-key; default separator: tab)",
    )
    q.add_argument("--print-key", action="store_true")
    q.add_argument("--print-offset", action="store_true", help="prefix PARTITION:OFFSET<tab>")
    q.add_argument(
        "-f",
        "--format",
        default=None,
        metavar="FMT",
        help="kcat's format: %%t topic, %%p partition, %%o offset, %%T timestamp (ms), %%k key, "
        "%%K key length, %%s value, %%S value length, %%h headers, \\n \\t (e.g. '%%p:%%o %%s\\n')",
    )
    add_value_format(q)
    q.set_defaults(func=run_consume)


def _line(record: ConsumerRecord, print_key: bool, key_sep: bytes, print_offset: bool) -> bytes:
    parts = b""
    if print_offset:
        parts += b"%d:%d\t" % (record.partition, record.offset)
    if print_key:
        parts += (record.key if record.key is not None else b"null") + key_sep
    return parts + (record.value if record.value is not None else b"null") + b"\n"


def _printer(args: argparse.Namespace) -> Printer:
    if args.format is not None:
        if args.print_key or args.print_offset or args.key_sep is not None:
            raise TierlogError(
                ErrorCode.INVALID_REQUEST,
                "--format replaces --print-key, --print-offset and --key-sep",
            )
        try:
            return compile_format(args.format)
        except ValueError as exc:
            raise TierlogError(ErrorCode.INVALID_REQUEST, f"--format: {exc}") from None
    print_key = args.print_key or args.key_sep is not None
    key_sep = (args.key_sep if args.key_sep is not None else "\t").encode()
    return lambda r: _line(r, print_key, key_sep, args.print_offset)


def _timestamp_ms(text: str) -> int:
    """--from-timestamp: ms since the epoch, or an ISO 8601 time (local time if no zone)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            f"--from-timestamp wants ms since the epoch or an ISO 8601 time, got {text!r}",
        ) from None


def _seek_start(consumer: Consumer, tps: list[TopicPartition], args: argparse.Namespace) -> None:
    if args.offset is not None:
        for tp in tps:
            consumer.seek(tp, args.offset)
    elif args.from_timestamp is not None:
        ts = _timestamp_ms(args.from_timestamp)
        found = consumer.offsets_for_times({tp: ts for tp in tps})
        for tp in tps:
            at = found.get(tp)
            if at is None:  # nothing that late yet: wait at the end
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, at.offset)


def run_consume(args: argparse.Namespace) -> int:
    if args.group and (args.partition or args.offset is not None or args.from_timestamp):
        print(
            "tierlog consume: --group takes no --partition, --offset or --from-timestamp",
            file=sys.stderr,
        )
        return 2
    printer, close_registry = decoding_printer(_printer(args), args)
    reset = "earliest" if args.from_beginning else "latest"
    check_reachable(args)
    consumer = Consumer(args.url, group_id=args.group, auto_offset_reset=reset, **creds(args))
    try:
        # First, even with a group: a subscription to a missing topic would wait for it for
        # ever; fail as the direct read does (UNKNOWN_TOPIC_OR_PARTITION).
        partitions = consumer.partitions_for(args.topic)
        if args.group:
            consumer.subscribe([args.topic])
        else:
            tps = [TopicPartition(args.topic, p) for p in args.partition or sorted(partitions)]
            consumer.assign(tps)
            _seek_start(consumer, tps, args)
        return _print_records(consumer, args, printer, sys.stdout.buffer)
    finally:
        consumer.close()
        close_registry()


class _Ends:
    """-e: each assigned partition's end (its high watermark when first assigned)."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.ends: dict[TopicPartition, int] = {}

    def reached(self) -> bool:
        assigned = self.consumer.assignment()
        new = [tp for tp in assigned if tp not in self.ends]
        if new:
            self.ends.update((tp, end or 0) for tp, end in self.consumer.end_offsets(new).items())
        return bool(assigned) and all(
            self.consumer.position(tp) >= self.ends[tp] for tp in assigned
        )


def _print_records(
    consumer: Consumer, args: argparse.Namespace, printer: Printer, out: BinaryIO
) -> int:
    printed = 0
    if args.max_messages is not None and args.max_messages <= 0:
        return 0
    ends = _Ends(consumer) if args.exit_at_end else None
    idle_since = time.monotonic()
    try:
        while True:
            # Never take more than will be printed: positions (and commits) follow poll().
            left = None if args.max_messages is None else args.max_messages - printed
            records = consumer.poll(0.5, max_records=left)
            if records:
                out.write(b"".join(printer(r) for r in records))
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
            if ends is not None and ends.reached():
                return 0
    except BrokenPipeError:  # e.g. `| head`: the reader has all it wanted
        return 0
