"""The load of bench/rolling_restart.py, each client a thread: idempotent acks=all producers
over HTTP and over Kafka (confluent-kafka), and Kafka consumers in one group. Each records the
latency of every acknowledged produce with the time it ended (so the bench can cut the run into
phases), what was acknowledged where, and the errors it met, split into those the client
retried (as Kafka's clients do: the partition moving, a broker going away) and the rest."""

from __future__ import annotations

import functools
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
from confluent_kafka import Consumer, KafkaError, Message, Producer

from tests.integration.cluster import Cluster

TOPIC = "rolling"
# Kafka's retriable produce errors (and the HTTP statuses that carry them), and a broker that
# went away mid-request: the client sends the same batch again.
RETRIABLE = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "LEADER_NOT_AVAILABLE",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
        "KAFKA_STORAGE_ERROR",
        "NOT_COORDINATOR",
        "COORDINATOR_NOT_AVAILABLE",
        "THROTTLING_QUOTA_EXCEEDED",
    }
)
PATIENCE_S = 60.0  # an idempotent batch is retried, unchanged, this long


@dataclass
class ClientStats:
    """One client's view: (end time, latency s) per acknowledged produce; acks (partition,
    offset, value); errors retried and not, by name."""

    latencies: list[tuple[float, float]] = field(default_factory=list)
    acked: list[tuple[int, int, str]] = field(default_factory=list)
    retried: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


class HttpProducer(threading.Thread):
    """Batches of `batch` records to one partition at a time, idempotent (its sequence per
    partition), to any running broker (brokers forward to the leader)."""

    def __init__(
        self, c: Cluster, name: str, partitions: int, stop: threading.Event, pause_s: float
    ) -> None:
        """`pause_s`: the wait between a batch's acknowledgement and the next batch."""
        super().__init__(name=name, daemon=True)
        self.c, self.partitions, self.stop, self.batch = c, partitions, stop, 10
        self.pause_s = pause_s
        self.stats = ClientStats()
        self.rng = random.Random(name)

    def run(self) -> None:
        http = httpx.Client(timeout=15)
        producer_id = self._producer_id(http)
        sequence = Counter[int]()
        n = 0
        while not self.stop.is_set():
            p = n // self.batch % self.partitions
            values = [f"{self.name}-{n + i}" for i in range(self.batch)]
            headers = {
                "X-Tierlog-Producer-Id": str(producer_id),
                "X-Tierlog-Producer-Epoch": "0",
                "X-Tierlog-Sequence": str(sequence[p]),
            }
            body = {"records": [{"value": v, "partition": p} for v in values]}
            offsets = self._send(http, body, headers)
            if offsets is None:
                return  # recorded as a failure: the sequence cannot go on past a lost batch
            sequence[p] += len(values)
            n += len(values)
            with self.stats.lock:
                self.stats.acked += [(p, o, v) for o, v in zip(offsets, values, strict=True)]
            time.sleep(self.pause_s)

    def _url(self) -> str:
        alive = self.c.alive()
        return self.rng.choice(alive).url if alive else self.c.brokers[1].url

    def _producer_id(self, http: httpx.Client) -> int:
        while True:
            try:
                r = http.post(f"{self._url()}/producers")
                if r.status_code == 201:
                    return int(r.json()["producer_id"])
            except httpx.HTTPError:
                pass
            time.sleep(0.2)

    def _send(
        self, http: httpx.Client, body: dict[str, Any], headers: dict[str, str]
    ) -> list[int] | None:
        start = time.monotonic()
        while time.monotonic() - start < PATIENCE_S:
            try:
                r = http.post(
                    f"{self._url()}/topics/{TOPIC}/records",
                    params={"acks": "all"},
                    json=body,
                    headers=headers,
                )
            except httpx.HTTPError as exc:
                self.stats.retried[type(exc).__name__] += 1  # the broker went away: again
                time.sleep(0.05)
                continue
            if r.status_code == 200:
                end = time.monotonic()
                self.stats.latencies.append((end, end - start))
                return [int(o["offset"]) for o in r.json()["offsets"]]
            code = str(r.json().get("error_code", r.status_code))
            if code not in RETRIABLE:
                self.stats.failed[code] += 1
                return None
            self.stats.retried[code] += 1
            time.sleep(0.05)
        self.stats.failed["unacknowledged after 60 s"] += 1
        return None


class KafkaProducerLoad(threading.Thread):
    """An idempotent acks=all confluent-kafka producer at a steady pace; librdkafka retries
    what is retriable itself, so any error reaching a delivery report is one it gave up on."""

    def __init__(self, c: Cluster, name: str, stop: threading.Event, per_s: int) -> None:
        super().__init__(name=name, daemon=True)
        self.c, self.stop, self.per_s = c, stop, per_s
        self.stats = ClientStats()

    def run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.c.bootstrap(),
                "log_level": 2,  # a broker restarting is expected: no connection-refused noise
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": int(PATIENCE_S * 1000),
            }
        )
        n = 0
        while not self.stop.is_set():
            value = f"{self.name}-{n}"
            done = functools.partial(self._done, time.monotonic())
            producer.produce(TOPIC, value=value.encode(), on_delivery=done)
            n += 1
            producer.poll(0)
            time.sleep(1 / self.per_s)
        left = producer.flush(PATIENCE_S + 10)
        if left:
            self.stats.failed["undelivered at the end"] += left

    def _done(self, sent: float, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.stats.failed[err.name()] += 1
            return
        end = time.monotonic()
        p, o = msg.partition(), msg.offset()
        assert p is not None and o is not None
        with self.stats.lock:
            self.stats.latencies.append((end, end - sent))
            self.stats.acked.append((p, o, (msg.value() or b"").decode()))


class GroupConsumer(threading.Thread):
    """A member of the consumer group `group`: what it read, and the errors it was given
    (librdkafka reports the others and goes on by itself; a fatal one ends the consumer)."""

    def __init__(self, c: Cluster, name: str, group: str, stop: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self.c, self.group, self.stop = c, group, stop
        self.read = 0
        self.stats = ClientStats()

    def run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.c.bootstrap(),
                "log_level": 2,  # a broker restarting is expected: no connection-refused noise
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "session.timeout.ms": 10_000,
            }
        )
        consumer.subscribe([TOPIC])
        try:
            while not self.stop.is_set():
                for msg in consumer.consume(500, 0.5):
                    err: Any = msg.error()
                    if err is None:
                        self.read += 1
                    elif err.fatal():
                        self.stats.failed[err.name()] += 1
                    else:
                        self.stats.retried[err.name()] += 1
        finally:
            consumer.close()
