"""`tierlog produce`: stdin's lines as records, like kafka-console-producer (and kcat -P):
an optional key per line (--key-sep), headers on every record (-H NAME=VALUE).

On a terminal it shows its progress; it prints a summary when done and when interrupted
(Ctrl-C, SIGTERM), saying what was acknowledged. A request refused for a quota (429) or
because tiering is behind (503 THROTTLING_QUOTA_EXCEEDED) wrote nothing: it is sent again
after the broker's Retry-After, as the Python Producer does, for up to --retry-timeout-ms;
a final failure says how many records were acknowledged before it.
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
from typing import Any

from rich.console import Console
from rich.progress import Progress, TaskID

from logformat.errors import ErrorCode, TierlogError
from tierlog.cli.progress import Tally, progress
from tierlog.cli.topics_cmd import admin_for
from tierlog.client import Admin
from tierlog.client.errors import ApiError

THROTTLE_BACKOFF_S = 0.1  # the first wait when the broker names none, doubling to 1 s


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
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    p.add_argument(
        "--retry-timeout-ms",
        type=int,
        default=120_000,
        help="how long one request may be throttled and resent before the command fails "
        "(Kafka's delivery.timeout.ms, 120 s)",
    )
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
    console = Console(stderr=True, soft_wrap=True)  # summaries stay one line in logs
    sent = Tally()
    try:
        with admin_for(args) as admin, progress(console, None, args.no_progress) as shown:
            task = shown.add_task(f"produce → {args.topic}", total=None, rate="-")
            _produce_lines(admin, args, headers, _Reporter(sent, shown, task))
    except KeyboardInterrupt:
        console.print(
            f"interrupted: {sent.records:,} record(s) acknowledged by {args.topic} "
            f"({sent.summary()}); the batch in flight may or may not be written",
            highlight=False,
        )
        raise
    except TierlogError:
        console.print(
            f"failed: {sent.records:,} record(s) acknowledged by {args.topic} before this "
            f"error ({sent.summary()}); stdin's lines after the first {sent.records:,} were "
            f"not written",
            highlight=False,
        )
        raise
    console.print(f"produced {sent.summary()} to {args.topic}", highlight=False)
    return 0


class _Reporter:
    """Counts acknowledged batches and shows them."""

    def __init__(self, tally: Tally, shown: Progress, task: TaskID) -> None:
        self.tally, self.shown, self.task = tally, shown, task

    def acknowledged(self, records: int, nbytes: int) -> None:
        self.tally.add(records, nbytes)
        rate = f"{self.tally.rate():,.0f}"
        self.shown.update(self.task, completed=self.tally.records, rate=rate)


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


def _produce_lines(
    admin: Admin, args: argparse.Namespace, headers: list[list[str]], report: _Reporter
) -> None:
    """Post stdin's lines, --batch-size records per request."""
    batch: list[dict[str, Any]] = []
    nbytes = 0
    for number, raw in enumerate(sys.stdin.buffer, 1):
        record = _record(raw.rstrip(b"\r\n"), number, args)
        if headers:
            record["headers"] = headers
        batch.append(record)
        nbytes += len(raw)
        if len(batch) >= args.batch_size:
            send_throttled(admin, args, batch)
            report.acknowledged(len(batch), nbytes)
            batch, nbytes = [], 0
    if batch:
        send_throttled(admin, args, batch)
        report.acknowledged(len(batch), nbytes)


def send_throttled(admin: Admin, args: argparse.Namespace, batch: list[dict[str, Any]]) -> None:
    """One produce request, sent again while the broker throttles it (nothing was written:
    a quota's 429 and tiering's 503 come before the body is read), after its Retry-After."""
    deadline = time.monotonic() + args.retry_timeout_ms / 1000
    delay = THROTTLE_BACKOFF_S
    while True:
        try:
            admin.produce_json(args.topic, batch, acks=args.acks)
            return
        except ApiError as exc:
            if exc.name != ErrorCode.THROTTLING_QUOTA_EXCEEDED.value:
                raise
            wait = max(delay, exc.retry_after_s)
            if time.monotonic() + wait >= deadline:
                raise TierlogError(
                    exc.code,
                    f"{exc.message} (still throttled after {args.retry_timeout_ms} ms of "
                    "retries: --retry-timeout-ms)",
                ) from exc
        time.sleep(wait)
        delay = min(delay * 2, 1.0)
