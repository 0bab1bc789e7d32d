"""Consumer throughput: Consumer.poll() and poll_arrow() next to raw HTTP Arrow fetches.

    .venv/bin/python -m bench.client_consume [--records 500000] [--partitions 4]
    .venv/bin/python -m bench.client_consume --smoke     # 20k records (the test suite)

bench/client.py calls consume_cases() on the topic it has just produced; run alone, this
module starts its own Postgres and one broker and produces the topic with raw Arrow HTTP.
Every case reads the same offsets of every partition (hot, and cold if the topic has records
below the hot log's start) and checks that each record was read exactly once, in offset order
per partition. The baseline, measured in the same call, is the fetch API's raw rate: Arrow
fetches of the same spans with httpx, all partitions concurrently, no client library.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pyarrow as pa

from bench.servers import bench_postgres
from tierlog.client import Consumer, TopicPartition

ARROW = "application/vnd.apache.arrow.stream"
FETCH_BYTES = 4 * 1024 * 1024  # per partition and request, for every case alike
FETCH_RECORDS = 5000  # the Consumer's records per fetch, so the baseline asks the same
Row = dict[str, object]


class PartitionSpan(NamedTuple):
    partition: int
    start: int
    end: int  # exclusive


class Reading(NamedTuple):
    records: int
    seconds: float
    latencies_ms: list[float]  # per fetch (baseline) or per poll call that returned records


def tier_spans(url: str, topic: str, records: int) -> dict[str, list[PartitionSpan]]:
    """Per tier, what to read: the first `records` records (split over the partitions) of the
    hot log, and of the cold range below the hot log's start (empty when nothing is cold)."""
    doc = httpx.get(f"{url}/topics/{topic}", timeout=30).raise_for_status().json()
    parts = doc["partitions"]
    quota = -(-records // len(parts))
    hot, cold = [], []
    for p in parts:
        h, c, n = p.get("hot"), p.get("cold"), int(p["partition"])
        if h is not None and p["high_watermark"] is not None:
            start = max(int(h["start"]), int(p["log_start_offset"] or 0))
            hot.append(PartitionSpan(n, start, min(int(p["high_watermark"]), start + quota)))
        if c is not None and h is not None and int(c["start"]) < int(h["start"]):
            end = min(int(c["end"]), int(h["start"]))
            cold.append(PartitionSpan(n, int(c["start"]), min(end, int(c["start"]) + quota)))
    return {
        "hot": [s for s in hot if s.end > s.start],
        "cold": [s for s in cold if s.end > s.start],
    }


def _check(span: PartitionSpan, offsets: Sequence[int]) -> None:
    want = list(range(span.start, span.end))
    if list(offsets) != want:
        got = f"{len(offsets)} records ({offsets[:3]}...{offsets[-3:]})"
        raise SystemExit(f"partition {span.partition}: read {got}, want {span.start}..{span.end}")


async def _raw_span(
    http: httpx.AsyncClient, base: str, topic: str, span: PartitionSpan, lat: list[float]
) -> list[pa.Table]:
    tables: list[pa.Table] = []
    at = span.start
    while at < span.end:
        started = time.perf_counter()
        r = await http.get(
            f"{base}/topics/{topic}/partitions/{span.partition}/records",
            params={
                "offset": at,
                "max_bytes": FETCH_BYTES,
                "max_records": min(FETCH_RECORDS, span.end - at),
            },
            headers={"accept": ARROW},
        )
        r.raise_for_status()
        table = pa.ipc.open_stream(pa.py_buffer(r.content)).read_all()
        lat.append((time.perf_counter() - started) * 1000)
        if table.num_rows == 0:
            raise SystemExit(f"partition {span.partition}: no records at {at}")
        tables.append(table)
        at = table.column("offset")[-1].as_py() + 1
    return tables


def raw_fetch(url: str, topic: str, spans: list[PartitionSpan]) -> Reading:
    """The fetch API's rate: each partition's span read from its leader by its own loop."""
    brokers = httpx.get(f"{url}/brokers", timeout=30).raise_for_status().json()
    urls = {int(b["id"]): b["url"].rstrip("/") for b in brokers["brokers"]}
    doc = httpx.get(f"{url}/topics/{topic}", timeout=30).raise_for_status().json()
    leader = {int(p["partition"]): urls.get(p["leader"], url) for p in doc["partitions"]}
    lat: list[float] = []

    async def run() -> list[list[pa.Table]]:
        async with httpx.AsyncClient(timeout=60) as http:
            return await asyncio.gather(
                *(_raw_span(http, leader[s.partition], topic, s, lat) for s in spans)
            )

    started = time.perf_counter()
    results = asyncio.run(run())
    seconds = time.perf_counter() - started
    count = 0
    for span, tables in zip(spans, results, strict=True):
        offsets = [o for t in tables for o in t.column("offset").to_pylist() if o < span.end]
        _check(span, offsets)
        count += len(offsets)
    return Reading(count, seconds, lat)


def _consume(
    url: str, topic: str, spans: list[PartitionSpan], take: Callable[[Consumer], Got]
) -> Reading:
    """Read `spans` with a Consumer; `take` polls once. Checked once the clock has stopped."""
    seen: dict[int, list[int]] = {s.partition: [] for s in spans}
    end = {s.partition: s.end for s in spans}
    # Each partition's next offset still wanted: a span may stop short of its log end (the
    # budget), and what the consumer reads past it must not count towards being done.
    reached = {s.partition: s.start for s in spans}
    lat: list[float] = []
    polled: list[Got] = []
    with Consumer(url, max_partition_fetch_bytes=FETCH_BYTES) as consumer:
        consumer.assign([TopicPartition(topic, s.partition) for s in spans])
        for s in spans:
            consumer.seek(TopicPartition(topic, s.partition), s.start)
        started = time.perf_counter()
        deadline = time.monotonic() + 300
        while any(reached[p] < end[p] for p in end) and time.monotonic() < deadline:
            t0 = time.perf_counter()
            got_now = take(consumer)
            if got_now.n:
                lat.append((time.perf_counter() - t0) * 1000)
                polled.append(got_now)
                for partition, last in got_now.last_offsets().items():
                    reached[partition] = max(reached[partition], min(end[partition], last + 1))
        seconds = time.perf_counter() - started
        got = sum(reached[s.partition] - s.start for s in spans)
    for one in polled:
        for partition, offset in one.pairs():
            if offset < end[partition]:
                seen[partition].append(offset)
    for span in spans:
        _check(span, seen[span.partition])
    return Reading(got, seconds, lat)


def poll_arrow_reading(url: str, topic: str, spans: list[PartitionSpan]) -> Reading:
    """`spans` read by a Consumer's poll_arrow() (bench/kafka_protocol.py's Python case)."""
    return _consume(url, topic, spans, _poll_arrow)


class Got(NamedTuple):
    n: int
    records: list[tuple[int, int]] | pa.Table  # (partition, offset) pairs, or poll_arrow's

    def last_offsets(self) -> dict[int, int]:
        """The highest offset read per partition (column-wise for a table: no per-row work)."""
        if isinstance(self.records, pa.Table):
            agg = self.records.group_by("partition").aggregate([("offset", "max")])
            return dict(
                zip(agg["partition"].to_pylist(), agg["offset_max"].to_pylist(), strict=True)
            )
        out: dict[int, int] = {}
        for partition, offset in self.records:
            out[partition] = max(out.get(partition, offset), offset)
        return out

    def pairs(self) -> Iterator[tuple[int, int]]:
        """(partition, offset) of every record, for the check."""
        if isinstance(self.records, pa.Table):
            t = self.records
            cols = t.column("partition").to_pylist(), t.column("offset").to_pylist()
            return zip(*cols, strict=True)
        return iter(self.records)


def _poll(consumer: Consumer) -> Got:
    # As an application would: every record's value is read (a tombstone's is None). Only
    # (partition, offset) is kept for the check, not the records (an application lets go).
    pairs: list[tuple[int, int]] = []
    for r in consumer.poll(1.0):
        _value = r.value
        pairs.append((r.partition, r.offset))
    return Got(len(pairs), pairs)


def _poll_arrow(consumer: Consumer) -> Got:
    table = consumer.poll_arrow(1.0)
    if table.num_rows and "value" not in table.column_names:
        raise SystemExit("poll_arrow: no value column")
    return Got(table.num_rows, table)


def _row(case: str, r: Reading, settings: str) -> Row:
    lat = sorted(r.latencies_ms) or [0.0]
    return {
        "case": case,
        "records_per_s": r.records / r.seconds if r.seconds else 0.0,
        "p50_ms": statistics.median(lat),
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "settings": settings,
    }


def consume_cases(
    url: str, topic: str, records: int, smoke: bool, tiers: Sequence[str] = ("hot", "cold")
) -> list[Row]:
    """Rows for bench/client.py: the raw fetch baseline, poll() and poll_arrow(), per tier
    of `tiers` with data. Latency: per fetch for the baseline, per poll() call returning
    records."""
    rows: list[Row] = []
    budget = min(records, 20_000) if smoke else records
    for tier, spans in tier_spans(url, topic, budget).items():
        if tier not in tiers:
            continue
        if not spans:
            rows.append(_row(f"consume {tier}", Reading(0, 0, []), f"no {tier} data in {topic}"))
            continue
        n = sum(s.end - s.start for s in spans)
        where = f"{tier}, {n} records, {len(spans)} partitions, fetch max_bytes {FETCH_BYTES}"
        if tier == "cold":
            # The first pass warms what the server keeps between reads (S3 connections, the
            # object index): measured first, the baseline alone would pay for it.
            raw_fetch(url, topic, spans)
            where += ", after one unmeasured pass"
        rows.append(
            _row(f"baseline: raw Arrow fetch ({tier})", raw_fetch(url, topic, spans), where)
        )
        rows.append(
            _row(
                f"Consumer.poll() ({tier})",
                _consume(url, topic, spans, _poll),
                f"{where}; max_poll_records 500, reads each value",
            )
        )
        rows.append(
            _row(f"Consumer.poll_arrow() ({tier})", _consume(url, topic, spans, _poll_arrow), where)
        )
    return rows


def print_rows(rows: list[Row]) -> None:
    for r in rows:
        print(
            f"{r['case']:36s} {float(str(r['records_per_s'])):12,.0f} rec/s  "
            f"p50 {float(str(r['p50_ms'])):7.2f} ms  p99 {float(str(r['p99_ms'])):7.2f} ms  "
            f"[{r['settings']}]"
        )


def produce(url: str, topic: str, records: int, partitions: int) -> None:
    """`records` ~100-byte keyed values, round-robin over the partitions, by Arrow HTTP."""
    batch = 10_000
    with httpx.Client(base_url=url, timeout=60) as http:
        for first in range(0, records, batch):
            n = min(batch, records - first)
            ids = range(first, first + n)
            table = pa.table(
                {
                    "key": pa.array([b"k%d" % i for i in ids]),
                    "value": pa.array([b"v%08d" % i + b"x" * 91 for i in ids]),
                    "partition": pa.array([i % partitions for i in ids], pa.int32()),
                }
            )
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as w:
                w.write_table(table)
            http.post(
                f"/topics/{topic}/records",
                content=sink.getvalue().to_pybytes(),
                headers={"content-type": ARROW},
                params={"acks": "1"},
            ).raise_for_status()


def main(argv: Sequence[str] | None = None) -> None:
    from tests.integration.brokers import BrokerProcess

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="20k records")
    args: Any = parser.parse_args(argv)
    records = 20_000 if args.smoke else args.records
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        os.chmod(tmp, 0o755)
        pg = bench_postgres(Path(tmp) / "pg", fast=False)
        broker = BrokerProcess(pg.start(), Path(tmp) / "broker").start()
        try:
            broker.create_topic("consumed", partitions=args.partitions)
            produce(broker.url, "consumed", records, args.partitions)
            print(f"consume: 1 broker, {records} records of ~100 B, {os.cpu_count()} cores shared")
            print_rows(consume_cases(broker.url, "consumed", records, args.smoke))
        finally:
            broker.stop()
            pg.stop()


if __name__ == "__main__":
    main()
