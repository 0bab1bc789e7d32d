"""Kafka transactions' cost, for bench/kafka_protocol.py: one confluent-kafka producer with
transactions of `txn_size` records against the same producer idempotent without them (same
records, acks=all), and the end-to-end latency of a one-record transaction: produce() to a
read_committed consumer holding the record (the commit, its markers included, in between).

Checks: read_committed reads exactly the records sent (each once), markers excluded.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from typing import NamedTuple

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

TXN_SIZE = 1000


class TxnFigures(NamedTuple):
    records: int
    idempotent_s: float
    transactional_s: float
    latency_ms: list[float]  # produce() -> seen by read_committed (one-record transactions)

    @property
    def ratio(self) -> float:
        return self.idempotent_s / self.transactional_s


def _values(n: int) -> list[bytes]:
    return [b'{"n": %d, "pad": "%s"}' % (i, b"x" * 64) for i in range(n)]


def _produce(bootstrap: str, topic: str, values: list[bytes], txn_size: int | None) -> float:
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"}
    if txn_size is None:
        p = Producer({**conf, "enable.idempotence": True})
    else:
        p = Producer({**conf, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
        p.init_transactions(30)
    start = time.perf_counter()
    step = txn_size or len(values)
    for at in range(0, len(values), step):
        if txn_size is not None:
            p.begin_transaction()
        for i, v in enumerate(values[at : at + step]):
            while True:
                try:
                    p.produce(topic, v, partition=(at + i) % 4)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    p.poll(0.01)
        if txn_size is not None:
            # flush() first: commit_transaction() flushing on its own took ~180 ms per
            # transaction here (librdkafka's Python binding), against ~10 ms for EndTxn.
            p.flush(60)
            p.commit_transaction(60)
    if p.flush(60) != 0:
        raise SystemExit(f"{topic}: records left unsent")
    return time.perf_counter() - start


def read_committed(bootstrap: str, topic: str, expected: int) -> int:
    """Records read_committed reads from the topic's 4 partitions (all, to the end)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(4)])
    got: set[bytes] = set()
    count = 0
    deadline = time.monotonic() + 60
    while count < expected and time.monotonic() < deadline:
        for msg in c.consume(1000, 0.2):
            if msg.error() is None:
                got.add(msg.value())
                count += 1
            elif msg.error().code() != KafkaError._PARTITION_EOF:
                raise SystemExit(f"read_committed: {msg.error()}")
    c.close()
    if count != expected or len(got) != expected:
        raise SystemExit(f"read_committed read {count:,} ({len(got):,} distinct) of {expected:,}")
    return count


def _latency(bootstrap: str, topic: str, rounds: int) -> list[float]:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"lat-{uuid.uuid4().hex}"})
    p.init_transactions(30)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-latency",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    seen: dict[bytes, float] = {}
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            msg = c.poll(0.05)
            if msg is not None and msg.error() is None:
                seen[msg.value()] = time.perf_counter()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    out = []
    try:
        for i in range(rounds):
            key = b"latency %d" % i
            p.begin_transaction()
            sent = time.perf_counter()
            p.produce(topic, key, partition=0)
            p.commit_transaction(30)
            deadline = time.perf_counter() + 30
            while key not in seen and time.perf_counter() < deadline:
                time.sleep(0.001)
            if key not in seen:
                raise SystemExit("a committed record never reached read_committed")
            out.append((seen[key] - sent) * 1000)
    finally:
        stop.set()
        reader.join()
        c.close()
    return out


def run(bootstrap: str, create: object, n: int, rounds: int) -> TxnFigures:
    """`create(topic)` makes a 4-partition topic."""
    assert callable(create)
    values = _values(n)
    create("txn-idem")
    _produce(bootstrap, "txn-idem", values[:100], None)  # warm: connections and metadata
    idem = _produce(bootstrap, "txn-idem", values, None)
    create("txn")
    txn = _produce(bootstrap, "txn", values, TXN_SIZE)
    read_committed(bootstrap, "txn", n)
    create("txn-latency")
    return TxnFigures(n, idem, txn, _latency(bootstrap, "txn-latency", rounds))


def print_figures(setup: str, f: TxnFigures) -> None:
    lat = sorted(f.latency_ms)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    print(f"\n{setup}: transactions of {TXN_SIZE:,} records vs idempotent (one producer)")
    print(f"  idempotent     {f.records / f.idempotent_s:>10,.0f} records/s")
    print(
        f"  transactional  {f.records / f.transactional_s:>10,.0f} records/s "
        f"({f.ratio:.0%} of idempotent)"
    )
    print(
        f"  produce -> commit -> read_committed: p50 {statistics.median(lat):.1f} ms, "
        f"p99 {p99:.1f} ms ({len(lat)} transactions)"
    )
    print("  read_committed read every transactional record once")
