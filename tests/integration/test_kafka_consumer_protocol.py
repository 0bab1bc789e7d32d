"""KIP-848's consumer group protocol (issue 30): confluent-kafka consumers with
`group.protocol=consumer` split a topic's partitions by the server's assignor, take over a
leaving member's partitions, and never hold one partition twice (ConsumerGroupHeartbeat)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, Producer, libversion
from confluent_kafka.admin import AdminClient

from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port

PARTITIONS = 4


@pytest.fixture(scope="module")
def kafka_broker(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, str]]:
    assert libversion()[1] >= 0x02040000, libversion()  # KIP-848 from librdkafka 2.4
    port = free_port()
    data = tmp_path_factory.mktemp("kafka-kip848") / "data-1"
    b = BrokerProcess(db_factory(), data, 1, ["--kafka-listen", f"127.0.0.1:{port}"])
    try:
        yield b.start(), f"127.0.0.1:{port}"
    finally:
        b.stop()


def _consumer(bootstrap: str, group: str, topic: str, assignor: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "group.remote.assignor": assignor,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    c.subscribe([topic])
    return c


class Polled:
    def __init__(self, consumers: list[Consumer]) -> None:
        self.consumers = consumers
        self.got: list[list[bytes]] = [[] for _ in consumers]

    def poll(self) -> None:
        for i, c in enumerate(self.consumers):
            msg = c.poll(0.05)
            if msg is None:
                continue
            assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF
            if msg.error() is None:
                self.got[i].append(msg.value())

    def settled(self, done: Callable[[list[set[int]]], bool], timeout: float = 40) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            owned = [{tp.partition for tp in c.assignment()} for c in self.consumers]
            assert sum(len(o) for o in owned) == len(set().union(*owned)), owned  # never twice
            if done(owned):
                return
            assert time.monotonic() < deadline, owned


def _split(owned: list[set[int]]) -> bool:
    return set().union(*owned) == set(range(PARTITIONS)) and all(owned)


def test_consumers_split_and_take_over_partitions(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    assignor = "uniform"
    topic, group = f"k848-{uuid.uuid4().hex[:8]}", f"k848g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, PARTITIONS)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(8):
        p.produce(topic, value=b"v%d" % i, partition=i % PARTITIONS)
    assert p.flush(30) == 0
    a = _consumer(bootstrap, group, topic, assignor)
    b = _consumer(bootstrap, group, topic, assignor)
    closed = False
    try:
        both = Polled([a, b])
        both.settled(_split)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        group_view = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert group_view.type == ConsumerGroupType.CONSUMER  # ConsumerGroupDescribe's answer
        assert len(group_view.members) == 2
        b.close()
        closed = True
        alone = Polled([a])
        alone.settled(lambda owned: owned[0] == set(range(PARTITIONS)))
        # Every record is seen. With no commits, `a` reads b's old partitions from the start
        # again, so counting values would count those twice: the distinct ones are waited for.
        want = {b"v%d" % i for i in range(8)}
        deadline = time.monotonic() + 30
        while (seen := set(both.got[0]) | set(both.got[1]) | set(alone.got[0])) != want:
            assert time.monotonic() < deadline, f"never seen: {sorted(want - seen)}"
            alone.poll()
    finally:
        a.close()
        if not closed:
            b.close()


def test_a_range_group_and_an_unknown_assignor(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic, group = f"k848-{uuid.uuid4().hex[:8]}", f"k848g-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, PARTITIONS)
    c = _consumer(bootstrap, group, topic, "range")
    try:
        Polled([c]).settled(lambda owned: owned[0] == set(range(PARTITIONS)))
    finally:
        c.close()
    odd = _consumer(bootstrap, f"k848g-{uuid.uuid4().hex[:8]}", topic, "no-such-assignor")
    try:
        deadline = time.monotonic() + 20
        while True:
            msg = odd.poll(0.1)
            if msg is not None and msg.error() is not None:
                assert "assignor" in msg.error().str().lower(), msg.error()
                break
            assert time.monotonic() < deadline, "no error for an unknown assignor"
    finally:
        odd.close()
