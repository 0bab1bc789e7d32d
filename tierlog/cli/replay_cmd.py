"""`tierlog replay`: read a topic's history as fast as possible and report the rate.

Every partition is read concurrently with large Arrow fetches, from --from-offset (default:
the log start, cold tier included) up to --to-offset (exclusive; default: the high
watermark when the replay starts). With --out, the records go to a file: Parquet
(.parquet), an Arrow IPC stream (.arrow, .arrows) or JSON lines (anything else), each row
with its partition. Without --out nothing is kept: a dry run, which says so (a measure of
the read rate). On a terminal it shows its progress; it prints a summary when done and when
interrupted (Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import argparse
import queue
import threading
from pathlib import Path
from typing import IO, Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console

from logformat.render import render_json_records
from logformat.schema import CONSUMER_SCHEMA
from tierlog.cli.credentials import creds
from tierlog.cli.progress import Tally, progress
from tierlog.client.reader import Span, TopicReader
from tierlog.client.types import TopicPartition

OUT_SCHEMA = pa.schema([pa.field("partition", pa.int32(), nullable=False), *CONSUMER_SCHEMA])
_DONE = object()


def add_replay(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    r = sub.add_parser(
        "replay", parents=[common], help="read a topic from the beginning, as fast as possible"
    )
    r.add_argument("topic")
    r.add_argument("--from-offset", type=int, default=None, help="per partition (default: start)")
    r.add_argument(
        "--to-offset", type=int, default=None, help="per partition, exclusive (default: the HW)"
    )
    r.add_argument("--partition", type=int, action="append", default=None, help="repeatable")
    r.add_argument("--out", type=Path, default=None, help="write the records to this file")
    r.add_argument("--format", choices=["parquet", "arrow", "jsonl"], default=None)
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(func=run_replay)


class _Writer:
    """Appends partition-tagged CONSUMER_SCHEMA tables to a Parquet, Arrow or JSONL file."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.fmt = fmt
        self._file: IO[bytes] = open(path, "wb")  # noqa: SIM115 (closed in close())
        self._parquet = pq.ParquetWriter(self._file, OUT_SCHEMA) if fmt == "parquet" else None
        self._arrow = pa.ipc.new_stream(self._file, OUT_SCHEMA) if fmt == "arrow" else None

    def write(self, tp: TopicPartition, table: pa.Table) -> None:
        column = pa.repeat(pa.scalar(tp.partition, pa.int32()), table.num_rows)
        tagged = pa.Table.from_arrays([column, *table.columns], schema=OUT_SCHEMA)
        if self._parquet is not None:
            self._parquet.write_table(tagged)
        elif self._arrow is not None:
            self._arrow.write_table(tagged)
        else:
            for batch in table.to_batches():
                rows = render_json_records(batch)
                self._file.write(
                    b"".join(orjson.dumps({"partition": tp.partition, **r}) + b"\n" for r in rows)
                )

    def close(self) -> None:
        if self._parquet is not None:
            self._parquet.close()
        if self._arrow is not None:
            self._arrow.close()
        self._file.close()


def _format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    suffix = args.out.suffix.lower()
    return {".parquet": "parquet", ".arrow": "arrow", ".arrows": "arrow"}.get(suffix, "jsonl")


def run_replay(args: argparse.Namespace) -> int:
    reader = TopicReader(args.url, **creds(args))
    console = Console(stderr=True, soft_wrap=True)  # summaries stay one line in logs
    tally = Tally()
    try:
        spans = reader.spans(args.topic, args.partition, args.from_offset, args.to_offset)
        total = sum(s.end - s.start for s in spans)
        if args.out is None:
            console.print(
                f"dry run: no --out, so the {total:,} records of {args.topic} are read and "
                "discarded (to measure the read rate); give --out FILE to keep them",
                highlight=False,
            )
        writer = _Writer(args.out, _format(args)) if args.out else None
        try:
            _replay(reader, spans, total, writer, console, args.no_progress, tally)
        finally:
            if writer is not None:
                writer.close()
    except KeyboardInterrupt:
        kept = f"; {args.out} holds them" if args.out else ""
        console.print(f"interrupted: replayed {tally.summary()} of {args.topic}{kept}")
        raise
    finally:
        reader.close()
    console.print(
        f"replayed {tally.summary()} of {args.topic} from {len(spans)} partition(s)"
        + (f" → {args.out}" if args.out else " (dry run: nothing kept)"),
        highlight=False,
    )
    return 0


def _replay(
    reader: TopicReader,
    spans: list[Span],
    total: int,
    writer: _Writer | None,
    console: Console,
    quiet: bool,
    tally: Tally,
) -> None:
    # Fetches land on the reader's I/O thread; this thread writes and draws, so a slow disk
    # slows the reads (the queue is bounded) but never blocks them mid-request.
    tables: queue.Queue[Any] = queue.Queue(maxsize=64)
    failure: list[BaseException] = []
    stopped = threading.Event()  # interrupted: drop what comes, never block the I/O thread

    def deliver(item: object) -> None:
        while not stopped.is_set():
            try:
                tables.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def read() -> None:
        try:
            reader.read(spans, lambda tp, table: deliver((tp, table)))
        except BaseException as exc:
            failure.append(exc)
        finally:
            deliver(_DONE)

    thread = threading.Thread(target=read, name="tierlog-replay", daemon=True)
    with progress(console, total, quiet) as shown:
        task = shown.add_task("replay", total=total, rate="-")
        thread.start()
        try:
            while (item := tables.get()) is not _DONE:
                tp, table = item
                if writer is not None:
                    writer.write(tp, table)
                tally.add(table.num_rows, table.nbytes)
                shown.update(task, completed=tally.records, rate=f"{tally.rate():,.0f}")
        finally:
            stopped.set()
    thread.join()
    if failure:
        raise failure[0]
