"""The Kafka listener's throughput beside the HTTP Arrow path, on one broker, in one run.

    .venv/bin/python -m bench.kafka_protocol [--seconds 5] [--clients 2] [--partitions 4]
    .venv/bin/python -m bench.kafka_protocol --smoke     # tiny sizes (the test suite)

Starts its own Postgres and one broker with --kafka-listen, then:
- produce (acks=1): `clients` processes POSTing Arrow batches of `batch` records (the
  baseline), then `clients` processes each running a confluent-kafka (librdkafka) Producer of
  the same values, timed until flush() returns;
- consume: the first `consume` records of the Kafka-produced topic read by raw Arrow HTTP
  fetches (the baseline, bench/client_consume.py's) and by one confluent-kafka Consumer
  (assign() from offset 0, consume() in batches; every message is a Python object).
Checks: every partition's log holds exactly what was acknowledged, and each reader got each
offset of its span once, in order. Prints records/s and the Kafka/HTTP ratio per direction.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

import httpx
from confluent_kafka import Consumer, Producer, TopicPartition

from bench.client_consume import FETCH_BYTES, PartitionSpan, Reading, raw_fetch, tier_spans
from bench.load import run_load
from bench.produce import ARROW, arrow_body, values
from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port
from tierlog.devstack.localpg import LocalPostgres


def _kafka_producer(
    bootstrap: str,
    topic: str,
    partitions: int,
    seconds: float,
    batch: int,
    out: mp.Queue,  # type: ignore[type-arg]
) -> None:
    vals = values(batch)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "enable.idempotence": False,
            "compression.type": "none",
        }
    )
    sent = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for i, v in enumerate(vals):
            while True:
                try:
                    p.produce(topic, v, partition=i % partitions)
                    break
                except BufferError:  # the local queue is full: let librdkafka send
                    p.poll(0.005)
        sent += len(vals)
        p.poll(0)
    left = p.flush(60)
    out.put((sent, left))


def kafka_produce(
    bootstrap: str, topic: str, partitions: int, seconds: float, batch: int, clients: int
) -> tuple[int, float]:
    """(records acknowledged, seconds until the last producer flushed)."""
    queue: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    procs = [
        mp.Process(
            target=_kafka_producer, args=(bootstrap, topic, partitions, seconds, batch, queue)
        )
        for _ in range(clients)
    ]
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=seconds + 120) for _ in procs]  # a dead producer: Empty
    elapsed = time.perf_counter() - started
    for proc in procs:
        proc.join()
    if any(left for _, left in results):
        raise SystemExit(f"producers left undelivered messages: {results}")
    return sum(sent for sent, _ in results), elapsed


def kafka_consume(bootstrap: str, topic: str, spans: list[PartitionSpan]) -> Reading:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-unused",  # assign() joins no group
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "max.partition.fetch.bytes": FETCH_BYTES,
            "fetch.max.bytes": FETCH_BYTES * max(1, len(spans)),
        }
    )
    want = sum(s.end - s.start for s in spans)
    offsets: dict[int, list[int]] = {s.partition: [] for s in spans}
    ends = {s.partition: s.end for s in spans}
    lat: list[float] = []
    started = time.perf_counter()
    c.assign([TopicPartition(topic, s.partition, s.start) for s in spans])
    got = 0
    while got < want:
        t0 = time.perf_counter()
        msgs = c.consume(10_000, 1.0)
        if not msgs:
            if time.perf_counter() - started > 120:
                raise SystemExit(f"the Kafka consumer stalled at {got:,} of {want:,}")
            continue
        lat.append((time.perf_counter() - t0) * 1000)
        for m in msgs:
            if m.error() is not None:
                raise SystemExit(f"consumer error: {m.error()}")
            part, off = m.partition(), m.offset()
            assert part is not None and off is not None  # a message without error has both
            if off < ends[part]:
                offsets[part].append(off)
                got += 1
    seconds = time.perf_counter() - started
    c.close()
    for s in spans:
        if offsets[s.partition] != list(range(s.start, s.end)):
            raise SystemExit(f"partition {s.partition}: Kafka consumer read the wrong offsets")
    return Reading(got, seconds, lat)


def _log_end(url: str, topic: str) -> int:
    doc = httpx.get(f"{url}/topics/{topic}", timeout=30).raise_for_status().json()
    return sum(int(p["high_watermark"] or 0) for p in doc["partitions"])


def _row(case: str, rate: float, base: float | None) -> str:
    ratio = f"{rate / base:7.0%}" if base else "      -"
    return f"{case:<44} {rate:>12,.0f} {ratio}"


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--consume", type=int, default=400_000, help="records to read")
    parser.add_argument("--smoke", action="store_true", help="seconds-long run, tiny sizes")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.clients, args.batch, args.consume = 0.5, 1, 200, 4000
    return args


def main() -> None:
    args = _args()
    vals = values(args.batch)
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        os.chmod(tmp, 0o755)
        pg = LocalPostgres(Path(tmp) / "pg")
        kport = free_port()
        broker = BrokerProcess(
            pg.start(), Path(tmp) / "broker", 1, ["--kafka-listen", f"127.0.0.1:{kport}"]
        ).start()
        bootstrap = f"127.0.0.1:{kport}"
        try:
            for topic in ("http", "kafka"):
                broker.create_topic(topic, partitions=args.partitions)
            print(
                f"tierlog Kafka protocol benchmark: 1 broker, acks=1, {args.partitions} "
                f"partitions, ~{len(vals[0])} B JSON values, {args.clients} producer processes "
                f"per case, {args.seconds:g} s per produce case, {args.batch} records per HTTP "
                f"request, {os.cpu_count()} cores shared by clients and server"
            )
            # HTTP produce: Arrow bodies of `batch` records; the broker spreads them.
            body = arrow_body(vals)
            path = "/topics/http/records?acks=1"
            run_load(
                broker.port, path, body, ARROW, args.batch, args.clients, min(1.0, args.seconds)
            )
            http = run_load(broker.port, path, body, ARROW, args.batch, args.clients, args.seconds)
            if http.errors:
                raise SystemExit(f"{http.errors} HTTP produce requests failed")
            sent, seconds = kafka_produce(
                bootstrap, "kafka", args.partitions, args.seconds, args.batch, args.clients
            )
            for topic in ("http", "kafka"):
                in_log = _log_end(broker.url, topic)
                print(f"{topic} topic: {in_log:,} records in the log")
            if _log_end(broker.url, "kafka") != sent:
                raise SystemExit(f"the Kafka topic holds a different count than {sent:,} acked")
            spans = tier_spans(broker.url, "kafka", args.consume)["hot"]
            raw_fetch(broker.url, "kafka", spans)  # warm: the same pages, both cases alike
            base_read = raw_fetch(broker.url, "kafka", spans)
            kafka_read = kafka_consume(bootstrap, "kafka", spans)
            produce_rate = sent / seconds
            print(f"\n{'case':<44} {'records/s':>12} vs HTTP")
            print(_row("produce: HTTP Arrow (baseline)", http.records_per_s, None))
            print(
                _row("produce: Kafka, confluent-kafka Producer", produce_rate, http.records_per_s)
            )
            base_rate = base_read.records / base_read.seconds
            kafka_rate = kafka_read.records / kafka_read.seconds
            print(
                _row(
                    f"consume: HTTP Arrow fetch (baseline), {base_read.records:,}", base_rate, None
                )
            )
            print(
                _row(
                    f"consume: Kafka, confluent-kafka Consumer, {kafka_read.records:,}",
                    kafka_rate,
                    base_rate,
                )
            )
            print(
                f"\nchecked: {sent:,} Kafka-acked records in the log; "
                "each reader read each offset once, in order"
            )
        finally:
            broker.stop()
            pg.stop()


if __name__ == "__main__":
    main()
