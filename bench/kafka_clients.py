"""The confluent-kafka (librdkafka) cases of bench/kafka_protocol.py: producer processes and
one consumer, with the settings they really use (printed with the table)."""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.synchronize
import resource
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.client_consume import FETCH_BYTES, PartitionSpan, Reading

CHUNK = 10_000  # records per produce_batch() call, as the HTTP baseline's request
# librdkafka's default linger (5 ms) makes batches of ~1,000 of these records at this rate,
# and a batch has a fixed cost in the broker; 50 ms lets batches fill to batch.size, about
# the HTTP baseline's 10,000-record requests. Both are measured.
LINGER_MS = 50
PRODUCER: dict[str, Any] = {
    "batch.size": 1_000_000,
    "compression.type": "none",
    "enable.idempotence": False,
    # every record of a run is queued at once: librdkafka batches, the bench does not wait
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_000_000,
}
CONSUMER: dict[str, Any] = {
    "fetch.wait.max.ms": 100,
    "max.partition.fetch.bytes": FETCH_BYTES,
    "enable.auto.commit": False,
}


def _cpu_s() -> float:
    """CPU seconds of this process, all its threads (librdkafka's too)."""
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def settings(acks: str) -> str:
    p = ", ".join(f"{k}={v}" for k, v in PRODUCER.items() if not k.startswith("queue."))
    c = ", ".join(f"{k}={v}" for k, v in CONSUMER.items())
    return (
        f"Producer: acks={acks}, linger.ms 5 or {LINGER_MS}, {p}, produce_batch() of "
        f"{CHUNK:,}; Consumer: {c}"
    )


def _producer(
    bootstrap: str,
    topic: str,
    acks: str,
    work: list[tuple[int, list[bytes], list[bytes]]],
    out: mp.Queue,  # type: ignore[type-arg]
    go: mp.synchronize.Event,
    linger_ms: int,
) -> None:
    config = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms}
    p = Producer({**config, **PRODUCER})
    p.list_topics(topic, timeout=30)  # metadata before the clock: leaders are known
    messages = [
        (partition, [{"key": k, "value": v} for k, v in zip(keys, vals, strict=True)])
        for partition, keys, vals in work
    ]
    out.put(("ready", 0, 0.0, 0.0))
    go.wait()
    start, cpu = time.perf_counter(), _cpu_s()
    queued = 0
    for partition, batch in messages:
        queued += p.produce_batch(topic, batch, partition=partition)
    left = p.flush(120)
    out.put(("done", queued - left, time.perf_counter() - start, _cpu_s() - cpu))


def produce(
    bootstrap: str,
    topic: str,
    acks: str,
    clients: int,
    chunks: list[tuple[int, list[bytes], list[bytes]]],
    linger_ms: int,
) -> tuple[int, float, float]:
    """(records acknowledged, seconds from the first send to the last flush, their CPU
    seconds meanwhile) of `clients` processes sending the (partition, keys, values) chunks
    between them, each partition's chunks from one process (so its order is the one given)."""
    queue: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    shares: list[list[tuple[int, list[bytes], list[bytes]]]] = [[] for _ in range(clients)]
    for chunk in chunks:
        shares[chunk[0] % clients].append(chunk)
    go = mp.Event()
    procs = [
        mp.Process(target=_producer, args=(bootstrap, topic, acks, share, queue, go, linger_ms))
        for share in shares
    ]
    for proc in procs:
        proc.start()
    for _ in procs:  # each has built its messages and knows the leaders
        queue.get(timeout=120)
    started = time.perf_counter()
    go.set()
    results = [queue.get(timeout=300) for _ in procs]  # a dead producer: Empty
    elapsed = time.perf_counter() - started
    for proc in procs:
        proc.join()
    return sum(r[1] for r in results), elapsed, sum(r[3] for r in results)


def consume(bootstrap: str, topic: str, spans: list[PartitionSpan]) -> tuple[Reading, int]:
    """One Consumer reading `spans` (assign(), no group): the reading and the key and value
    bytes it got; every offset of every span once, in order, or SystemExit."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-unused",  # assign() joins no group
            "fetch.max.bytes": FETCH_BYTES * max(1, len(spans)),
            **CONSUMER,
        }
    )
    want = sum(s.end - s.start for s in spans)
    offsets: dict[int, list[int]] = {s.partition: [] for s in spans}
    ends = {s.partition: s.end for s in spans}
    lat: list[float] = []
    got = size = 0
    started = time.perf_counter()
    c.assign([TopicPartition(topic, s.partition, s.start) for s in spans])
    while got < want:
        t0 = time.perf_counter()
        msgs = c.consume(10_000, 1.0)
        if not msgs:
            if time.perf_counter() - started > 300:
                raise SystemExit(f"the Kafka consumer stalled at {got:,} of {want:,}")
            continue
        lat.append((time.perf_counter() - t0) * 1000)
        for m in msgs:
            if m.error() is not None:
                raise SystemExit(f"consumer error: {m.error()}")
            part, off, key, value = m.partition(), m.offset(), m.key(), m.value()
            assert part is not None and off is not None  # a message without error has both
            if off < ends[part]:
                offsets[part].append(off)
                size += len(key or b"") + len(value or b"")
                got += 1
    seconds = time.perf_counter() - started
    c.close()
    for s in spans:
        if offsets[s.partition] != list(range(s.start, s.end)):
            raise SystemExit(f"partition {s.partition}: Kafka consumer read the wrong offsets")
    return Reading(got, seconds, lat), size
