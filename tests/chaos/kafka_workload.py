"""Kafka-protocol clients in the chaos workload (confluent-kafka, i.e. librdkafka): an
idempotent acks=all producer and a consumer reading every partition from the start, each a
thread writing what it saw into the History, exactly as the HTTP clients do.

The producer is configured as an application would be: Java's default delivery timeout
(120 s) and both clients' default request timeout (30 s). librdkafka does its own retrying
(leader moves, NOT_ENOUGH_REPLICAS, timeouts); a record it gives up on (its message timeout)
was never acknowledged, and Kafka allows it to be in the log or not: recorded as such
(`History.failed`), not as a violation. Once the nemesis has stopped, though, every record
sent must be delivered (the checker's "given up on a healed cluster"), and an error that is
neither a timeout nor retriable (a fatal idempotence error, say) fails the run.

What the runs found (docs/operations.md, "The chaos suite"): a leader in doubt of its lease
answered NOT_LEADER_OR_FOLLOWER in its own epoch, which parks a librdkafka partition until
its records time out (fixed: ingest/replication/partition.py); and a broker registered again
after its lease lapsed lost its Kafka address from the registry, so the other brokers'
Metadata answers sent clients to its HTTP port (seed 3255133382, fixed: ingest/broker.py).

librdkafka's idempotence decisions (its "eos" debug lines: producer ids, epoch bumps, drains,
sequence errors) are kept in the History, and a run with violations reports the last of them,
so a duplicate can be traced to what the client did.

TIERLOG_CHAOS_KAFKA_PRODUCER: idempotent (the default), plain (one request in flight) or off;
TIERLOG_CHAOS_KAFKA_DEBUG=1 also prints all of librdkafka's log to stderr as it comes. A plain
producer is held to at-least-once but not to per-key order: librdkafka bounds requests in
flight per connection, not per partition (its issue 1969), so after a leader change a retried
batch can land after a later one sent to the new leader over another connection (seen as
`kafka|key-1|124` at offset 129 after `kafka|key-1|138`). The idempotent producer drains a
partition before it moves, and keeps order. librdkafka's implicit acknowledgements carry no
offset: recorded so, and checked as "in its partition, exactly once"."""

from __future__ import annotations

import logging
import os
import random
import re
import sys
import threading
import time
import traceback
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from tests.chaos.history import UNKNOWN_OFFSET, History, Kind, value_of
from tests.chaos.workload import TOPIC
from tests.integration.cluster import Cluster

MESSAGE_TIMEOUT_MS = 120_000  # Java's delivery.timeout.ms default (librdkafka's is 300 s)
REQUEST_TIMEOUT_MS = 30_000  # both clients' default
FLUSH_S = MESSAGE_TIMEOUT_MS / 1000 + 15  # at the end: every record delivered or given up
PRODUCER = os.environ.get("TIERLOG_CHAOS_KAFKA_PRODUCER") or "idempotent"  # see the docstring
IDEMPOTENT = PRODUCER == "idempotent"
IN_FLIGHT = 50  # records awaiting delivery before the producer waits


# librdkafka's eos lines about idempotence; its connection noise (brokers killed and cut off
# are expected) is left out.
_IDEMPOTENCE = re.compile(r"idemp|epoch|drain|pid|seq|bump|persist|out_of_order", re.I)


class _IdempotenceLines(logging.Handler):
    """librdkafka's log (the client's `logger`) into the History, idempotence lines only."""

    def __init__(self, history: History, name: str) -> None:
        super().__init__()
        self.history, self.name = history, name
        self.echo = bool(os.environ.get("TIERLOG_CHAOS_KAFKA_DEBUG"))

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        line = f"{time.strftime('%H:%M:%S')} {self.name}: {text}"
        if self.echo:  # everything librdkafka says, as before the History kept any of it
            print(line, file=sys.stderr, flush=True)
        if _IDEMPOTENCE.search(text) and not text.startswith("REBOOTSTRAP"):
            self.history.client_line(line)


def _client_logger(history: History, name: str) -> logging.Logger:
    logger = logging.getLogger(f"tests.chaos.librdkafka.{name}")
    logger.propagate = False  # not pytest's captured log: the History keeps what matters
    logger.setLevel(logging.DEBUG)
    logger.handlers = [_IdempotenceLines(history, name)]
    return logger


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
        if not IDEMPOTENT:
            history.unordered.add(name)  # see the module's docstring

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
                "request.timeout.ms": REQUEST_TIMEOUT_MS,
                "retry.backoff.ms": 100,
                "error_cb": self._client_error,
                # librdkafka's idempotence decisions (epoch bumps, sequence errors), kept
                "debug": "eos",
                "logger": _client_logger(self.history, self.name),
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
            sent = time.monotonic()
            producer.produce(
                TOPIC,
                key=key.encode(),
                value=value.encode(),
                on_delivery=lambda err, msg, sent=sent: self._done(err, msg, sent),
            )
            producer.poll(0)
            time.sleep(0.02)
        left = producer.flush(FLUSH_S)
        if left:
            self.history.error(f"{self.name}: {left} records neither delivered nor given up")

    def _client_error(self, err: KafkaError) -> None:
        """librdkafka's own errors: connection trouble is expected here, a fatal one is not
        (an idempotent producer that can no longer go on)."""
        if err.fatal():
            self.history.error(f"{self.name}: fatal client error: {err}")

    def _done(self, err: KafkaError | None, msg: Message, sent: float) -> None:
        with self._lock:
            self.pending -= 1
        if err is not None:
            value = (msg.value() or b"").decode()
            reason = f"{err.name()} (partition {msg.partition()}): {err.str()}"
            if err.code() == KafkaError._MSG_TIMED_OUT or err.retriable():
                self.history.delivery_failed(self.name, value, sent, reason)  # unacknowledged
            else:
                self.history.error(f"{self.name}: {value} refused: {reason}")
            return
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
