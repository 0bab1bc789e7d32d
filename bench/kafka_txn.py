"""Kafka transactions' cost, for bench/kafka_protocol.py: one confluent-kafka producer with
transactions of `TXN_SIZE` records against the same producer idempotent without them (same
records, acks=all), and the end-to-end latency of a one-record transaction: produce() to a
read_committed consumer holding the record (the commit, its markers included, in between).

A shared machine's load moves wall-clock figures by a factor of several, so the cases run
in interleaved rounds (idempotent, idempotent flushed, transactional, idempotent, ...; the
best round of each is shown) and each round also counts the broker's CPU time per record,
which load moves far less. The load average is printed beside them. The middle case is the
idempotent producer flushed every `TXN_SIZE` records: the requests a transaction's records
go in, each waited for as a transaction waits before EndTxn (librdkafka sends a partition's
batch per Produce request: ~250 records here, against batches of up to 1 MB unflushed),
without the transaction; what the transaction itself costs is the difference from it.

Beside them, the client's ceiling (kafka_txn_ceiling.py): the same cases against
librdkafka's mock cluster, a broker inside the client's process that costs next to nothing.
With transactions of 1,000 records this producer stays far below its idempotent rate even
there (each transaction waits for AddPartitionsToTxn, its flush and EndTxn in turn), and no
broker on the same machine can show it more: the ceiling is printed beside the goal.

Checks: after each transactional round, one transaction is aborted and one more committed
after it; read_committed then reads exactly the committed records (each once) and none of the
aborted. Each idempotent round's topic holds exactly the records sent, and so does each
of the ceiling's.
"""

from __future__ import annotations

import os
import resource
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import NamedTuple

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from bench import kafka_txn_ceiling
from bench.kafka_txn_ceiling import MockCluster

TXN_SIZE = 1000
PARTITIONS = 4


IDEMPOTENT, FLUSHED, TRANSACTIONAL = (
    "idempotent",
    f"idempotent, flush/{TXN_SIZE:,}",
    "transactional",
)
CASES = (IDEMPOTENT, FLUSHED, TRANSACTIONAL)


class Round(NamedTuple):
    case: str
    records: int
    seconds: float
    broker_cpu_s: float  # the brokers' CPU seconds while the clock ran (idle's taken off)
    client_cpu_s: float  # this process's (the producer runs in it)

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def broker_us(self) -> float:
        return self.broker_cpu_s / self.records * 1e6

    @property
    def client_us(self) -> float:
        return self.client_cpu_s / self.records * 1e6


class TxnFigures(NamedTuple):
    rounds: list[Round]
    latency_ms: list[float]  # produce() -> seen by read_committed (one-record transactions)
    load: tuple[tuple[float, float, float], tuple[float, float, float]]  # before, after
    idle: float  # the brokers' CPU seconds per second when idle (subtracted)
    ceiling: dict[str, list[float]]  # case -> records/s of its rounds on the mock cluster

    def best(self, case: str) -> Round:
        return max((r for r in self.rounds if r.case == case), key=_rate)

    def cpu(self, case: str) -> float:
        """The median broker CPU µs per record of the case's rounds."""
        return statistics.median(r.broker_us for r in self.rounds if r.case == case)


def _rate(r: Round) -> float:
    return r.rate


class Meter(NamedTuple):
    """The brokers' CPU seconds so far, their CPU seconds per second when idle (measured
    before the rounds), and a measure of it again (after them: the rounds' topics add to
    the brokers' background work; the mean of the two is taken off each round)."""

    broker_cpu: Callable[[], float]
    idle: float
    idle_now: Callable[[], float]


def _own_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _values(n: int, tag: bytes = b"c") -> list[bytes]:
    return [b'{"%s": %d, "pad": "%s"}' % (tag, i, b"x" * 64) for i in range(n)]


def producer(bootstrap: str, transactional: bool) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"}
    if not transactional:
        return Producer({**conf, "enable.idempotence": True})
    p = Producer({**conf, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    return p


def _send(p: Producer, topic: str, values: list[bytes], first: int = 0) -> None:
    for i, v in enumerate(values):
        while True:
            try:
                p.produce(topic, v, partition=(first + i) % PARTITIONS)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                p.poll(0.01)


def _transaction(p: Producer, topic: str, values: list[bytes], first: int, commit: bool) -> None:
    p.begin_transaction()
    _send(p, topic, values, first)
    # flush() first: commit_transaction() flushing on its own took ~180 ms per transaction
    # here (librdkafka's Python binding), against ~10 ms for EndTxn.
    p.flush(60)
    if commit:
        p.commit_transaction(60)
    else:
        p.abort_transaction(60)


def produce(p: Producer, topic: str, values: list[bytes], case: str) -> float:
    start = time.perf_counter()
    if case == IDEMPOTENT:
        _send(p, topic, values)
    for at in range(0, len(values), TXN_SIZE) if case != IDEMPOTENT else ():
        if case == TRANSACTIONAL:
            _transaction(p, topic, values[at : at + TXN_SIZE], at, commit=True)
        else:
            _send(p, topic, values[at : at + TXN_SIZE], at)
            p.flush(60)
    if p.flush(60) != 0:
        raise SystemExit(f"{topic}: records left unsent")
    return time.perf_counter() - start


def _round(bootstrap: str, topic: str, values: list[bytes], case: str, meter: Meter) -> Round:
    txn = case == TRANSACTIONAL
    p = producer(bootstrap, txn)
    produce(p, topic, values[:100], case)  # warm: connections, metadata
    cpu, own = meter.broker_cpu(), _own_cpu()
    seconds = produce(p, topic, values, case)
    r = Round(case, len(values), seconds, meter.broker_cpu() - cpu, _own_cpu() - own)
    committed = values[:100] + values
    if txn:  # aborted records between committed ones: read_committed must skip them
        _transaction(p, topic, _values(500, b"aborted"), 0, commit=False)
        tail = _values(10, b"tail")
        _transaction(p, topic, tail, 0, commit=True)
        committed += tail
    read_exactly(bootstrap, topic, committed)
    return r


def _ceiling_round(mock: MockCluster, topic: str, values: list[bytes], case: str) -> float:
    """The case's round against librdkafka's mock cluster (kafka_txn_ceiling.py): records/s."""
    kafka_txn_ceiling.create(mock, topic, PARTITIONS)
    p = producer(mock.bootstrap, case == TRANSACTIONAL)
    produce(p, topic, values[:100], case)
    seconds = produce(p, topic, values, case)
    read_exactly(mock.bootstrap, topic, values[:100] + values, "read_uncommitted")
    return len(values) / seconds


def read_exactly(
    bootstrap: str, topic: str, expected: list[bytes], isolation: str = "read_committed"
) -> None:
    """A consumer at `isolation` reads exactly `expected` from the topic's partitions: each
    once, and nothing else (read_committed: no aborted record, no marker)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 50,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 120
    # Done at every partition's end once all came (a partition's end is reported again only
    # after more records): what came past them was not committed.
    while (len(eof) < PARTITIONS or len(got) < len(expected)) and time.monotonic() < deadline:
        for msg in c.consume(1000, 0.2):
            err, value = msg.error(), msg.value()
            if err is None and value is not None:
                got.append(value)
                eof.discard(msg.partition() or 0)
            elif err is not None and err.code() == KafkaError._PARTITION_EOF:
                eof.add(msg.partition() or 0)
            elif err is not None:
                raise SystemExit(f"{isolation}: {err}")
    c.close()
    want = sorted(expected)
    if sorted(got) != want:
        extra = len(set(got) - set(want))
        sent = "committed" if isolation == "read_committed" else "sent"
        raise SystemExit(
            f"{topic}: {isolation} read {len(got):,} records ({len(set(got)):,} distinct, "
            f"{extra:,} not {sent}), {len(want):,} were {sent}"
        )


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
            value = None if msg is None or msg.error() is not None else msg.value()
            if value is not None:
                seen[value] = time.perf_counter()

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


def run(
    bootstrap: str, create: Callable[[str], object], n: int, repeats: int, rounds: int, meter: Meter
) -> TxnFigures:
    """`create(topic)` makes a 4-partition topic. `repeats` rounds of each case, interleaved,
    each repeat's followed by the client's ceiling's rounds (kafka_txn_ceiling.py)."""
    values = _values(n)
    load = os.getloadavg()
    mock = kafka_txn_ceiling.start()
    out = []
    ceiling: dict[str, list[float]] = {case: [] for case in CASES}
    for i in range(repeats):
        for k, case in enumerate(CASES):
            topic = f"txn-{k}-{i}"
            create(topic)
            out.append(_round(bootstrap, topic, values, case, meter))
        for k, case in enumerate(CASES):
            ceiling[case].append(_ceiling_round(mock, f"ceiling-{k}-{i}", values, case))
    idle = (meter.idle + meter.idle_now()) / 2
    out = [r._replace(broker_cpu_s=max(0.0, r.broker_cpu_s - idle * r.seconds)) for r in out]
    create("txn-latency")
    latency = _latency(bootstrap, "txn-latency", rounds)
    return TxnFigures(out, latency, (load, os.getloadavg()), idle, ceiling)


def print_figures(setup: str, f: TxnFigures) -> None:
    lat = sorted(f.latency_ms)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    before, after = (", ".join(f"{x:.1f}" for x in load) for load in f.load)
    print(f"\n{setup}: transactions of {TXN_SIZE:,} records vs idempotent (one producer)")
    print(
        f"  {len(f.rounds) // len(CASES)} rounds of each, interleaved, "
        f"{f.rounds[0].records:,} records each; load average {before} before, {after} after "
        f"({os.cpu_count()} cores); the broker's idle CPU ({f.idle:.1%} of a core) subtracted"
    )
    print(f"  {'round':<24} {'records/s':>10} {'broker CPU us/rec':>18} {'client CPU us/rec':>18}")
    for r in f.rounds:
        print(f"  {r.case:<24} {r.rate:>10,.0f} {r.broker_us:>18.1f} {r.client_us:>18.1f}")
    txn = f.best(TRANSACTIONAL)
    for case in (IDEMPOTENT, FLUSHED):
        base = f.best(case)
        print(
            f"  best rounds: transactional {txn.rate:,.0f} records/s, {txn.rate / base.rate:.0%} "
            f"of {case}'s {base.rate:,.0f}; median broker CPU per record "
            f"{f.cpu(TRANSACTIONAL):.1f} us against {f.cpu(case):.1f} us"
        )
    _print_ceiling(f, txn.rate)
    print(
        f"  produce -> commit -> read_committed: p50 {statistics.median(lat):.1f} ms, "
        f"p99 {p99:.1f} ms ({len(lat)} transactions)"
    )
    print(
        "  read_committed read every transactional record once, none of the aborted "
        "transactions' (checked after every round)"
    )


def _print_ceiling(f: TxnFigures, txn_rate: float) -> None:
    best = {case: max(rates) for case, rates in f.ceiling.items()}
    print(
        "  the client's ceiling (the same cases against librdkafka's mock cluster, in the "
        "client's process: no disk, no replication, no markers), best rounds:"
    )
    print(
        "    "
        + ", ".join(f"{case} {rate:,.0f}" for case, rate in best.items())
        + f" records/s: transactional {best[TRANSACTIONAL] / best[IDEMPOTENT]:.0%} of "
        f"idempotent there, tierlog's transactional {txn_rate / best[TRANSACTIONAL]:.0%} "
        "of the ceiling's"
    )
