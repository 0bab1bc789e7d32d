"""Kafka-protocol clients in the chaos workload (confluent-kafka, i.e. librdkafka): an
idempotent acks=all producer and a consumer reading every partition from the start, each a
thread writing what it saw into the History, exactly as the HTTP clients do.

librdkafka does its own retrying (leader moves, NOT_ENOUGH_REPLICAS, timeouts); what reaches
the delivery callback as an error is what it gave up on, which an idempotent producer must
never do within its message timeout: that is recorded as an error, and fails the run.

Known broken, so the producer is left out by default (TIERLOG_CHAOS_KAFKA_PRODUCER=idempotent
or =plain runs it, =plain with one request in flight; TIERLOG_CHAOS_KAFKA_DEBUG=1 logs
librdkafka's idempotence decisions to stderr) and only the consumer runs. It met 60 s
delivery timeouts and duplicates (seeds 2626, 4247227297). One cause is fixed: a leader still
in its epoch but unsure of its lease answered NOT_LEADER_OR_FOLLOWER; librdkafka ignores
metadata whose leader epoch is not newer, parked the partition until its messages timed
out, then bumped its producer epoch and sent again what had been written (duplicates). Such
a leader now answers NOT_ENOUGH_REPLICAS or REQUEST_TIMED_OUT (ingest/replication/
partition.py); seed 4247227297 then ran clean. Still open: seed 3255133382 (CI's schedule)
timed out 20 records of one partition, sent while Postgres was paused and the partition's
leader met a full disk (no duplicate), and this consumer's thread did not stop in time.
librdkafka's implicit acknowledgements carry no offset: recorded so, and checked as "in its
partition, exactly once"."""

from __future__ import annotations

import os
import random
import threading
import time
import traceback
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from tests.chaos.history import UNKNOWN_OFFSET, History, Kind, value_of
from tests.chaos.workload import TOPIC
from tests.integration.cluster import Cluster

MESSAGE_TIMEOUT_MS = 60_000  # as the HTTP idempotent producer's patience
REQUEST_TIMEOUT_MS = 10_000
PRODUCER = os.environ.get("TIERLOG_CHAOS_KAFKA_PRODUCER") or "off"  # see the docstring
IDEMPOTENT = PRODUCER == "idempotent"
IN_FLIGHT = 50  # records awaiting delivery before the producer waits


class KafkaChaosProducer(threading.Thread):
    """Records of one key at a time, keyed so Kafka's partitioner (murmur2, as
    logformat.partitioner) never picks the idle partition."""

    def __init__(
        self,
        cluster: Cluster,
        history: History,
        name: str,
        keys: list[str],
        stop: threading.Event,
        seed: int,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.cluster, self.history, self.keys, self.stop = cluster, history, keys, stop
        self.rng = random.Random(seed)
        self.pending = 0
        self._lock = threading.Lock()
        self.kind = Kind.IDEMPOTENT_ALL if IDEMPOTENT else Kind.PLAIN_ALL
        history.producer(name, self.kind)

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # a crashed client thread must fail the run, not vanish
            where = traceback.format_exc(limit=-2).strip().replace("\n", " | ")
            self.history.error(f"{self.name} crashed: {exc!r} ({where})")

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.cluster.bootstrap(),
                "log_level": 2,  # brokers killed and cut off are expected: no connection noise
                "enable.idempotence": IDEMPOTENT,
                # Without idempotence, one request in flight keeps retries in order (Kafka's
                # advice), so the per-key order check holds the plain producer too.
                "max.in.flight.requests.per.connection": 5 if IDEMPOTENT else 1,
                "acks": "all",
                "partitioner": "murmur2_random",  # Java's: the keys' partitions as computed
                "linger.ms": 5,
                "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                # A request to a paused broker is given up after this (librdkafka's default,
                # 30 s, is half the message timeout: two such waits and a record expires).
                "request.timeout.ms": REQUEST_TIMEOUT_MS,
                "retry.backoff.ms": 100,
                # librdkafka's idempotence decisions (epoch bumps, sequence errors) on stderr
                **({"debug": "eos"} if os.environ.get("TIERLOG_CHAOS_KAFKA_DEBUG") else {}),
            }
        )
        n = 0
        while not self.stop.is_set():
            if self.pending >= IN_FLIGHT:
                producer.poll(0.1)
                continue
            key = self.rng.choice(self.keys)
            value = value_of(self.name, key, n)
            n += 1
            with self._lock:
                self.pending += 1
            producer.produce(TOPIC, key=key.encode(), value=value.encode(), on_delivery=self._done)
            producer.poll(0)
            time.sleep(0.02)
        left = producer.flush(MESSAGE_TIMEOUT_MS / 1000 + 15)
        if left and self.kind is Kind.IDEMPOTENT_ALL:
            self.history.error(f"{self.name}: {left} records neither delivered nor failed")

    def _done(self, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            self.pending -= 1
        if err is not None:
            if self.kind is Kind.IDEMPOTENT_ALL:
                at = time.strftime("%H:%M:%S")
                self.history.error(
                    f"{self.name}: delivery failed at {at} (partition {msg.partition()}): {err}"
                )
            return  # a plain producer's record given up: in the log or not, as with HTTP's
        key = (msg.key() or b"").decode()
        value = (msg.value() or b"").decode()
        partition, offset = msg.partition(), msg.offset()
        assert partition is not None
        # No offset: librdkafka acknowledged it implicitly (a later batch of the same
        # producer succeeded after this one's answer was lost), so where it is is unknown.
        self.history.ack(
            self.name, partition, UNKNOWN_OFFSET if offset is None else offset, key, value
        )


class KafkaChaosConsumer(threading.Thread):
    """Every partition from offset 0, by assignment (no group: its rebalances are not what
    is checked here), recording each record read."""

    def __init__(
        self, cluster: Cluster, history: History, name: str, partitions: int, stop: threading.Event
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.cluster, self.history, self.partitions, self.stop = cluster, history, partitions, stop

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:
            self.history.error(f"{self.name} crashed: {exc!r}")

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.cluster.bootstrap(),
                "log_level": 2,  # brokers killed and cut off are expected: no connection noise
                "group.id": f"chaos-{self.name}",  # librdkafka wants one; assign() never joins
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 200,
                "enable.partition.eof": False,
            }
        )
        try:
            consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(self.partitions)])
            while not self.stop.is_set():
                for msg in consumer.consume(500, 0.5):
                    self._record(msg)
        finally:
            consumer.close()

    def _record(self, msg: Message) -> None:
        err: Any = msg.error()
        if err is not None:
            if not err.retriable() and err.fatal():
                self.history.error(f"{self.name}: {err}")
            return
        partition, offset = msg.partition(), msg.offset()
        assert partition is not None and offset is not None
        key = msg.key()
        value = msg.value()
        self.history.read(
            self.name,
            partition,
            offset,
            None if key is None else key.decode(),
            None if value is None else value.decode(),
        )
