"""Kafka consumer groups (classic protocol) from real clients, on the same group store as
HTTP groups (issue 19): partitions split between members, a leaving member's partitions
move, committed offsets are where a restarted consumer resumes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port

PARTITIONS = 4


@pytest.fixture(scope="module")
def kafka_broker(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    data = tmp_path_factory.mktemp("kafka-groups") / "data-1"
    b = BrokerProcess(db_factory(), data, 1, ["--kafka-listen", f"127.0.0.1:{port}"])
    try:
        yield b.start(), f"127.0.0.1:{port}"
    finally:
        b.stop()


def _topic(broker: BrokerProcess) -> str:
    name = f"g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, PARTITIONS)
    return name


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, value=b"v%d" % i, partition=i % PARTITIONS)
    assert p.flush(30) == 0


def _consumer(bootstrap: str, group: str, topic: str, strategy: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 100,
            "fetch.wait.max.ms": 100,
            "partition.assignment.strategy": strategy,
        }
    )
    c.subscribe([topic])
    return c


class Polled:
    """The records each consumer received (librdkafka heartbeats in its own threads; polling
    serves its rebalances)."""

    def __init__(self, consumers: list[Consumer]) -> None:
        self.consumers = consumers
        self.got: list[list[Any]] = [[] for _ in consumers]

    def poll(self) -> None:
        for i, c in enumerate(self.consumers):
            msg = c.poll(0.05)
            if msg is None:
                continue
            assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF
            if msg.error() is None:
                self.got[i].append(msg)

    def until_records(self, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while sum(len(g) for g in self.got) < count:
            assert time.monotonic() < deadline, [len(g) for g in self.got]
            self.poll()

    def settled(self, timeout: float = 30) -> list[set[int]]:
        """Each consumer's partitions once together they hold all, each exactly once, and
        every consumer holds some (the last to join has had its share)."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            owned = [{tp.partition for tp in c.assignment()} for c in self.consumers]
            every = set().union(*owned)
            complete = sum(len(o) for o in owned) == PARTITIONS and every == set(range(PARTITIONS))
            if complete and all(owned):
                return owned
            assert time.monotonic() < deadline, owned


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_group_splits_rebalances_and_resumes(kafka_broker: Any, strategy: str) -> None:
    broker, bootstrap = kafka_broker
    topic, group = _topic(broker), f"kg-{uuid.uuid4().hex[:8]}"
    a, b = (_consumer(bootstrap, group, topic, strategy) for _ in range(2))
    try:
        both = Polled([a, b])
        owned = both.settled()  # both members share the partitions
        _produce(bootstrap, topic, 0, 40)
        both.until_records(40)
        for got, mine in zip(both.got, owned, strict=True):
            assert {m.partition() for m in got} <= mine  # each read only its own
        a.commit(asynchronous=False)
        b.commit(asynchronous=False)
        # `tierlog groups describe` (HTTP) shows the Kafka members.
        doc = broker.http.get(f"/groups/{group}").json()
        assert len(doc["members"]) == 2, doc
        b.close()  # LeaveGroup: a takes over b's partitions
        assert Polled([a]).settled() == [set(range(PARTITIONS))]
    finally:
        a.close()
        b.close()
    _produce(bootstrap, topic, 40, 8)
    c = _consumer(bootstrap, group, topic, strategy)
    try:
        # Restarted: only what came after the committed offsets.
        again = Polled([c])
        again.until_records(8)
        assert sorted(m.value() for m in again.got[0]) == sorted(b"v%d" % i for i in range(40, 48))
    finally:
        c.close()
