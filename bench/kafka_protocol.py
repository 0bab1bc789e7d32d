"""The Kafka listener's throughput beside the HTTP Arrow path and the Python client, in one run.

    .venv/bin/python -m bench.kafka_protocol [--records 1000000] [--clients 2]
    .venv/bin/python -m bench.kafka_protocol --smoke     # tiny sizes, one broker (the suite)
    .venv/bin/python -m bench.kafka_protocol --no-cluster
    .venv/bin/python -m bench.kafka_protocol --txn-only  # transactions vs idempotent only

Starts its own Postgres, then one broker, then a 3-broker cluster (RF=3,
min.insync.replicas=2), each broker with --kafka-listen. On each, with acks=all and the same
keyed ~100 B JSON records (4 partitions; a topic per case):
- produce: the baseline, pre-encoded Arrow bodies of 10,000 records POSTed to the
  partitions' leaders by `clients` processes, one request in flight per partition
  (bench/arrow_baseline.py); the Python client's send_table(); `clients` processes each
  running a confluent-kafka Producer (produce_batch() of the same 10,000-record chunks,
  each partition's from one process);
- consume: the first `consume` records of the Kafka-produced topic, read by raw Arrow HTTP
  fetches (the baseline, bench/client_consume.py's), the Python client's poll_arrow(), and
  one confluent-kafka Consumer (assign() from the spans' starts; every message a Python
  object, as librdkafka's Python binding hands them out).
Checks: each topic's log holds exactly the records sent; each reader got each offset of its
span once, in order; the Kafka consumer got the same value bytes as HTTP reads there.
Also transactions (bench/kafka_txn.py, 1 broker): one producer with transactions of 1,000
records against the same producer idempotent, in interleaved rounds with the broker's CPU
per record beside the wall clock, and commit -> read_committed latency.
Also, the Kafka listener without a client library: pre-encoded Produce requests sent as
the HTTP baseline sends its bodies (bench/pre_encoded.py), and bare Fetch requests read as
the HTTP baseline reads (bench/kafka_fetch.py).
Prints records/s, MB/s (keys and values), the ratio to the HTTP baseline of the same setup
and direction, and CPU time per record: the brokers' (all of them, from /proc) and the
clients' (client processes while the clock ran; in-process clients' whole call).
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

import httpx
import pyarrow as pa
import pyarrow.compute as pc

from bench import kafka_clients, kafka_fetch, kafka_txn, pre_encoded
from bench.client_consume import (
    ARROW,
    FETCH_BYTES,
    PartitionSpan,
    poll_arrow_reading,
    raw_fetch,
    tier_spans,
)
from bench.client_produce import CHUNK, PARTITIONS, log_end, records, send_table
from bench.databases import new_database
from bench.servers import bench_postgres
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster
from tests.integration.ports import free_port


class Row(NamedTuple):
    setup: str
    case: str
    records: int
    seconds: float
    size: int  # key and value bytes
    cpu_s: float  # the brokers' CPU seconds during the case
    client_cpu_s: float  # the clients' (this process and its finished children)
    baseline: bool


class Setup(NamedTuple):
    name: str
    url: str
    bootstrap: str
    pids: list[int]
    create: Callable[[str], object]
    kafka: dict[int, str]  # a broker's HTTP port -> its Kafka listener's host:port
    idle: float  # the brokers' CPU seconds per second when idle

    def kafka_leaders(self, topic: str) -> dict[int, str]:
        """Per partition, its leader's Kafka listener."""
        return {p: self.kafka[urlsplit(u).port or 80] for p, u in _leaders(self.url, topic).items()}


def _cpu(pids: list[int]) -> float:
    """User + system CPU seconds of the processes so far."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / os.sysconf("SC_CLK_TCK")


def _client_cpu() -> float:
    """CPU seconds of this process, all threads: the clients that run in it (raw fetches,
    the Python client, the Kafka consumer); client processes report their own."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def idle_rate(pids: list[int], seconds: float) -> float:
    """The brokers' CPU seconds per second with no load (heartbeats, the controller, metadata
    polls): subtracted from each case, so a slow case is not charged for time passing."""
    before = _cpu(pids)
    time.sleep(seconds)
    return (_cpu(pids) - before) / seconds


@contextmanager
def _cpu_meter(s: Setup) -> Iterator[list[float]]:
    """[brokers' CPU seconds beyond idle, clients' CPU seconds] of the block, once ended."""
    out: list[float] = []
    before, client, began = _cpu(s.pids), _client_cpu(), time.perf_counter()
    yield out
    idle = s.idle * (time.perf_counter() - began)
    out += [max(0.0, _cpu(s.pids) - before - idle), _client_cpu() - client]


def _chunks(n: int) -> list[tuple[int, list[bytes], list[bytes]]]:
    """The records as raw_arrow sends them: chunk k of CHUNK records to partition k % 4."""
    vals, keys = records(n)
    return [
        (k % PARTITIONS, keys[lo : lo + CHUNK], vals[lo : lo + CHUNK])
        for k, lo in enumerate(range(0, n, CHUNK))
    ]


def _leaders(url: str, topic: str) -> dict[int, str]:
    with httpx.Client(base_url=url, timeout=30) as http:
        brokers = {b["id"]: b["url"] for b in http.get("/brokers").json()["brokers"]}
        parts = http.get(f"/topics/{topic}").json()["partitions"]
    return {int(p["partition"]): brokers.get(p["leader"], url) for p in parts}


def _span_bytes(url: str, topic: str, spans: list[PartitionSpan]) -> int:
    """Key and value bytes of the spans, read over HTTP (untimed: what readers must get)."""
    total = 0
    with httpx.Client(base_url=url, timeout=60) as http:
        for s in spans:
            at = s.start
            while at < s.end:
                r = http.get(
                    f"/topics/{topic}/partitions/{s.partition}/records",
                    params={"offset": at, "max_bytes": FETCH_BYTES, "max_records": s.end - at},
                    headers={"accept": ARROW},
                ).raise_for_status()
                t = pa.ipc.open_stream(pa.py_buffer(r.content)).read_all()
                for name in ("key", "value"):
                    total += pc.sum(pc.binary_length(t.column(name))).as_py() or 0
                at = t.column("offset")[-1].as_py() + 1
    return total


def produce_rows(s: Setup, n: int, clients: int) -> list[Row]:
    chunks = _chunks(n)
    size = sum(len(k) + len(v) for _, keys, vals in chunks for k, v in zip(keys, vals, strict=True))
    rows = []

    def case(
        topic: str, name: str, run: Callable[[], tuple[int, float, float | None]], base: bool
    ) -> None:
        s.create(topic)
        with _cpu_meter(s) as cpu:
            acked, seconds, client_cpu = run()
        if client_cpu is not None:  # client processes: their CPU while the clock ran
            cpu[1] = client_cpu
        in_log = log_end(s.url, topic) - (topic == "client")  # send_table's warm-up record
        if acked != n or in_log != n:
            raise SystemExit(f"{name}: {acked:,} acked, {in_log:,} in the log, {n:,} sent")
        rows.append(Row(s.name, name, n, seconds, size, cpu[0], cpu[1], base))

    case(
        "http",
        "produce: HTTP Arrow",
        lambda: pre_encoded.produce("http", _leaders(s.url, "http"), "http", clients, chunks),
        True,
    )
    case(
        "wire",
        "produce: Kafka wire, pre-encoded",
        lambda: pre_encoded.produce(
            "kafka",
            s.kafka_leaders("wire"),
            "wire",
            clients,
            chunks,
        ),
        False,
    )
    case("client", "produce: Python client", lambda: _send_table(s.url, n), False)
    for topic, linger in (("kafka-linger5", 5), ("kafka", kafka_clients.LINGER_MS)):
        case(
            topic,
            f"produce: Kafka, confluent, linger {linger}ms",
            functools.partial(
                kafka_clients.produce, s.bootstrap, topic, "all", clients, chunks, linger
            ),
            False,
        )
    return rows


def _send_table(url: str, n: int) -> tuple[int, float, float | None]:
    rate = send_table(url, "client", n)["records_per_s"]  # checks the log holds n + 1
    assert isinstance(rate, float)
    return n, n / rate, None


def consume_rows(s: Setup, n: int) -> list[Row]:
    spans = tier_spans(s.url, "kafka", n)["hot"]
    size = _span_bytes(s.url, "kafka", spans)
    raw_fetch(s.url, "kafka", spans)  # warm: the same pages for every case
    rows = []
    with _cpu_meter(s) as cpu:
        base = raw_fetch(s.url, "kafka", spans)
    rows.append(
        Row(s.name, "consume: HTTP Arrow", base.records, base.seconds, size, cpu[0], cpu[1], True)
    )
    leaders = s.kafka_leaders("kafka")
    with _cpu_meter(s) as cpu:
        wire = kafka_fetch.fetch(leaders, "kafka", spans)
    rows.append(
        Row(
            s.name,
            "consume: Kafka wire, Fetch",
            wire.records,
            wire.seconds,
            size,
            cpu[0],
            cpu[1],
            False,
        )
    )
    with _cpu_meter(s) as cpu:
        py = poll_arrow_reading(s.url, "kafka", spans)
    rows.append(
        Row(s.name, "consume: Python client", py.records, py.seconds, size, cpu[0], cpu[1], False)
    )
    with _cpu_meter(s) as cpu:
        kafka, got = kafka_clients.consume(s.bootstrap, "kafka", spans)
    if got != size:
        raise SystemExit(f"the Kafka consumer read {got:,} key and value bytes, HTTP {size:,}")
    name = "consume: Kafka, confluent-kafka"
    rows.append(Row(s.name, name, kafka.records, kafka.seconds, size, cpu[0], cpu[1], False))
    return rows


def print_table(rows: list[Row]) -> None:
    print(
        f"\n{'setup':<15} {'case':<38} {'records/s':>10} {'MB/s':>7} {'vs HTTP':>7} "
        f"{'CPU us/rec: brokers':>19} {'clients':>7}"
    )
    base: dict[tuple[str, str], float] = {}
    for r in rows:
        rate = r.records / r.seconds
        kind = r.case.split(":")[0]
        if r.baseline:
            base[(r.setup, kind)] = rate
        ratio = "base" if r.baseline else f"{rate / base[(r.setup, kind)]:.0%}"
        print(
            f"{r.setup:<15} {r.case:<38} {rate:>10,.0f} {r.size / r.seconds / 1e6:>7.1f} "
            f"{ratio:>7} {r.cpu_s / r.records * 1e6:>19.2f} "
            f"{r.client_cpu_s / r.records * 1e6:>7.2f}"
        )


def _kafka_args() -> list[str]:
    return ["--kafka-listen", f"127.0.0.1:{free_port()}"]


def _kafka_ports(brokers: list[BrokerProcess]) -> dict[int, str]:
    return {b.port: b.extra_args[b.extra_args.index("--kafka-listen") + 1] for b in brokers}


def _bootstrap(brokers: list[BrokerProcess]) -> str:
    return ",".join(_kafka_ports(brokers).values())


def _pids(brokers: list[BrokerProcess]) -> list[int]:
    return [b.proc.pid for b in brokers if b.proc is not None]


def run(args: argparse.Namespace, tmp: Path, db: str) -> list[Row]:
    rows: list[Row] = []
    broker = BrokerProcess(db, tmp / "single", 1, _kafka_args()).start()
    try:
        one = Setup(
            "1 broker",
            broker.url,
            _bootstrap([broker]),
            _pids([broker]),
            lambda t: broker.create_topic(t, partitions=PARTITIONS),
            _kafka_ports([broker]),
            idle_rate(_pids([broker]), args.idle_seconds),
        )
        if not args.txn_only:
            rows += produce_rows(one, args.records, args.clients)
            rows += consume_rows(one, args.consume)
        meter = kafka_txn.Meter(
            functools.partial(_cpu, one.pids),
            one.idle,
            functools.partial(idle_rate, one.pids, args.idle_seconds),
        )
        args.txn = kafka_txn.run(
            one.bootstrap, one.create, args.txn_records, args.txn_repeats, args.txn_rounds, meter
        )
    finally:
        broker.stop()
    if args.no_cluster or args.txn_only:
        return rows
    (tmp / "cluster").mkdir()
    c = Cluster(new_database(db, "cluster"), tmp / "cluster", 3)
    for b in c.brokers.values():
        b.extra_args += _kafka_args()
    c.start()
    try:
        three = Setup(
            "3 brokers RF=3",
            c.any().url,
            _bootstrap(list(c.brokers.values())),
            _pids(list(c.brokers.values())),
            lambda t: c.create_topic(t, partitions=PARTITIONS, min_insync_replicas=2),
            _kafka_ports(list(c.brokers.values())),
            idle_rate(_pids(list(c.brokers.values())), args.idle_seconds),
        )
        rows += produce_rows(three, args.records, args.clients) + consume_rows(three, args.consume)
    finally:
        c.stop()
    return rows


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000, help="per produce case")
    parser.add_argument("--clients", type=int, default=2, help="Kafka producer processes")
    parser.add_argument("--consume", type=int, default=400_000, help="records to read")
    parser.add_argument("--no-cluster", action="store_true", help="one broker only")
    parser.add_argument("--txn-records", type=int, default=100_000, help="transactional case")
    parser.add_argument("--txn-rounds", type=int, default=200, help="latency transactions")
    parser.add_argument(
        "--txn-repeats", type=int, default=3, help="interleaved rounds of each transactional case"
    )
    parser.add_argument("--txn-only", action="store_true", help="the transactional case only")
    parser.add_argument("--smoke", action="store_true", help="seconds-long run, tiny sizes")
    args = parser.parse_args()
    args.idle_seconds = 3.0
    if args.smoke:
        args.records, args.clients, args.consume, args.idle_seconds = 4_000, 1, 2_000, 0.1
        args.txn_records, args.txn_rounds, args.txn_repeats = 3_000, 5, 1
        args.no_cluster = True  # the suite's time: the cluster's cases run the same code
    return args


def main() -> None:
    args = _args()
    vals, keys = records(1)
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        os.chmod(tmp, 0o755)
        pg = bench_postgres(Path(tmp) / "pg", fast=args.smoke)  # --no-sync: only the smoke
        try:
            rows = run(args, Path(tmp), pg.start())
        finally:
            pg.stop()
    print(
        f"tierlog Kafka protocol benchmark: acks=all, {PARTITIONS} partitions, keyed records "
        f"of ~{len(keys[0]) + len(vals[0])} B (~{len(vals[0])} B JSON values), "
        f"{args.records:,} records per produce case, {args.consume:,} per consume case, "
        f"{os.cpu_count()} cores shared by clients and brokers; the cluster: 3 brokers, RF=3, "
        "min.insync.replicas=2"
    )
    print(
        f"Kafka clients: {args.clients} producer process(es), 1 consumer; "
        + kafka_clients.settings("all")
    )
    print(
        f"HTTP baseline: Arrow bodies of {CHUNK:,} records to the leaders from "
        f"{args.clients} process(es), 1 in flight per partition; "
        f"fetches of {FETCH_BYTES:,} B per partition; Python client: send_table(), poll_arrow()"
    )
    if rows:
        print_table(rows)
    kafka_txn.print_figures("1 broker", args.txn)
    print(
        "\nchecked: every topic holds exactly the records sent; each reader read each offset "
        "once, in order; the Kafka consumer read the key and value bytes HTTP reads there"
    )


if __name__ == "__main__":
    main()
