"""An idempotent librdkafka producer through a partition leader's kill -9 (issue 19): an RF=3
cluster of broker processes, each with its Kafka listener; every acknowledged number is read
back over Kafka from the new leader exactly once and in order."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.cluster import Cluster, wait_for

TOTAL = 3000  # numbers produced; the leader dies once a sixth of them are acknowledged


@pytest.fixture
def cluster(fresh_db: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(fresh_db, tmp_path, 3, kafka=True).start()
    yield c
    c.stop()


def _read_all(bootstrap: str, topic: str, end: int) -> list[int]:
    """Partition 0's values from offset 0 up to `end` (its high watermark), over Kafka."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",  # assign() never joins a group
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    out: list[int] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        next_offset = 0
        while next_offset < end and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None or msg.error() is not None:
                assert msg is None or msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                continue
            out.append(int(msg.value()))
            next_offset = msg.offset() + 1
    finally:
        c.close()
    return out


def test_idempotent_producer_through_a_leader_kill(cluster: Cluster) -> None:
    cluster.create_topic("numbers", 1, 3, min_insync_replicas=2)
    # Each broker is named at the Kafka address it registered, whichever broker answers
    # (the ports are unrelated to the HTTP ones: nothing can be derived).
    first = AdminClient({"bootstrap.servers": cluster.bootstrap(exclude=2)})
    named = first.list_topics(timeout=10).brokers
    assert {i: (b.host, b.port) for i, b in named.items()} == {
        i: ("127.0.0.1", p) for i, p in cluster.kafka_ports.items()
    }
    leader = cluster.leader("numbers")
    epoch = cluster.partition("numbers")["leader_epoch"]
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap(),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.num.messages": 50,  # many batches in flight when the leader dies
            "message.timeout.ms": 60_000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    acked: list[int] = []
    errors: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append(int(msg.value()))

    def send(numbers: range) -> None:
        for n in numbers:
            producer.produce("numbers", value=b"%d" % n, partition=0, on_delivery=delivered)
            if n % 50 == 49:
                producer.poll(0.02)  # a steady stream of batches, not one burst

    send(range(TOTAL // 3))
    wait_for("a sixth acknowledged", lambda: producer.poll(0.05) >= 0 and len(acked) >= TOTAL // 6)
    leader.kill(signal.SIGKILL)  # batches in flight to it: their outcome is unknown
    send(range(TOTAL // 3, TOTAL))
    assert producer.flush(60) == 0
    assert errors == [], errors[:5]
    new = cluster.partition("numbers")
    assert new["leader"] != leader.broker_id and new["leader_epoch"] > epoch
    # Acknowledged in the order produced: the idempotent producer keeps order through retries.
    assert acked == list(range(TOTAL))
    survivors = cluster.bootstrap(exclude=leader.broker_id)

    # Nothing duplicated: the log holds exactly the numbers, each once, in order.
    def high_watermark() -> int | None:
        hw = int(cluster.partition("numbers")["high_watermark"])
        return hw if hw >= TOTAL else None

    end = wait_for("every number below the high watermark", high_watermark)
    assert end == TOTAL
    assert _read_all(survivors, "numbers", end) == list(range(TOTAL))
