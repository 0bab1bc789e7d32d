"""Kafka consumer groups (classic protocol) from real clients, on the same group store as
HTTP groups (issue 19): partitions split between members, a leaving member's partitions
move, committed offsets are where a restarted consumer resumes."""

from __future__ import annotations

import io
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from kio.schema.consumer_protocol_subscription.v0.data import (
    ConsumerProtocolSubscription as SubscriptionV0,
)
from kio.schema.errors import ErrorCode as Err
from kio.schema.find_coordinator.v2.request import (
    FindCoordinatorRequest as FindCoordinatorRequestV2,
)
from kio.schema.find_coordinator.v2.response import (
    FindCoordinatorResponse as FindCoordinatorResponseV2,
)
from kio.schema.heartbeat.v3.request import HeartbeatRequest as HeartbeatRequestV3
from kio.schema.heartbeat.v3.response import HeartbeatResponse as HeartbeatResponseV3
from kio.schema.join_group.v5.request import JoinGroupRequest as JoinGroupRequestV5
from kio.schema.join_group.v5.request import JoinGroupRequestProtocol
from kio.schema.join_group.v5.response import JoinGroupResponse as JoinGroupResponseV5
from kio.schema.types import GroupId
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32

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

    def settled_with(
        self, done: Callable[[list[set[int]]], bool], timeout: float = 30
    ) -> list[set[int]]:
        """Each consumer's partitions, once `done` holds for them."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            owned = [{tp.partition for tp in c.assignment()} for c in self.consumers]
            if done(owned):
                return owned
            assert time.monotonic() < deadline, owned

    def settled(self, timeout: float = 30) -> list[set[int]]:
        """Each consumer's partitions once together they hold all, each exactly once, and
        every consumer holds some (the last to join has had its share)."""

        def complete(owned: list[set[int]]) -> bool:
            every = set().union(*owned)
            once = sum(len(o) for o in owned) == PARTITIONS
            return once and every == set(range(PARTITIONS)) and all(owned)

        return self.settled_with(complete, timeout)


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


MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "session.timeout.ms": 1500, "heartbeat.interval.ms": 100,
              "partition.assignment.strategy": "range"})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
"""


def test_a_killed_member_s_partitions_move_after_its_session(kafka_broker: Any) -> None:
    """kill -9 leaves no LeaveGroup behind: the member's session lapses (the expiry sweep
    or the next heartbeat removes it) and the survivor is told to rejoin for everything."""
    broker, bootstrap = kafka_broker
    topic, group = _topic(broker), f"kg-{uuid.uuid4().hex[:8]}"
    member = subprocess.Popen([sys.executable, "-c", MEMBER, bootstrap, group, topic])
    a = _consumer(bootstrap, group, topic, "range")
    try:
        # The member holds the rest once `a` holds only its share (the member's own join
        # needs `a` polled: an eager member hands partitions over in its poll).
        Polled([a]).settled_with(lambda owned: 0 < len(owned[0]) < PARTITIONS)
        doc = broker.http.get(f"/groups/{group}").json()
        assert len(doc["members"]) == 2, doc
        member.kill()
        member.wait()
        assert Polled([a]).settled() == [set(range(PARTITIONS))]
    finally:
        member.kill()
        member.wait()
        a.close()


# kafka-python reads its bundled schemas with a deprecated importlib call: its noise, not ours
@pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")
def test_kafka_python_group_consumer_commits(kafka_broker: Any) -> None:
    """kafka-python's own group coordinator (its versions, its heartbeat thread): it joins,
    reads every partition, commits; the commit is what confluent-kafka resumes from."""
    from kafka import KafkaConsumer

    broker, bootstrap = kafka_broker
    topic, group = _topic(broker), f"kg-{uuid.uuid4().hex[:8]}"
    _produce(bootstrap, topic, 0, 12)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=200,
    )
    try:
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 12:
            assert time.monotonic() < deadline, len(got)
            # A long poll: kafka-python 3.0.12 never finishes a rejoin whose SyncGroup answer
            # arrives after a poll() returned on its timeout (no heartbeat, no OffsetFetch
            # after it: seen under load); poll() returns as soon as records arrive.
            for records in consumer.poll(timeout_ms=5000).values():
                got.extend(records)
        consumer.commit()
        assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(12))
    finally:
        consumer.close()
    _produce(bootstrap, topic, 12, 4)
    c = _consumer(bootstrap, group, topic, "range")
    try:
        again = Polled([c])
        again.until_records(4)
        assert sorted(m.value() for m in again.got[0]) == sorted(b"v%d" % i for i in range(12, 16))
    finally:
        c.close()


def _call(bootstrap: str, api_key: int, version: int, body: Any, response: Any) -> Any:
    """One request (header v1, non-flexible versions only) and its decoded answer."""
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    frame = struct.pack(">hhih", api_key, version, 7, 1) + b"t" + out.getvalue()
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        answer = b""
        while len(answer) < 4 or len(answer) < 4 + struct.unpack(">i", answer[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "the broker closed the connection"
            answer += chunk
    decoded, _ = entity_reader(response)(answer, 8)  # after the size and correlation id
    return decoded


def _join(bootstrap: str, group: str, protocol: str, topic: str) -> Any:
    sub = io.BytesIO()
    sub.write(struct.pack(">h", 0))
    entity_writer(SubscriptionV0)(sub, SubscriptionV0(topics=(topic,), user_data=None))
    req = JoinGroupRequestV5(
        group_id=GroupId(group),
        session_timeout=timedelta(seconds=6),
        rebalance_timeout=timedelta(seconds=6),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name=protocol, metadata=sub.getvalue()),),
    )
    return _call(bootstrap, 11, 5, req, JoinGroupResponseV5)


def _heartbeat(bootstrap: str, group: str, member: str, generation: int) -> Any:
    req = HeartbeatRequestV3(
        group_id=GroupId(group),
        generation_id=i32(generation),
        member_id=member,
        group_instance_id=None,
    )
    return _call(bootstrap, 12, 3, req, HeartbeatResponseV3).error_code


def test_bad_group_requests_get_kafka_errors(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic, group = _topic(broker), f"kg-{uuid.uuid4().hex[:8]}"
    assert _join(bootstrap, "", "range", topic).error_code is Err.invalid_group_id
    joined = _join(bootstrap, group, "range", topic)
    assert joined.error_code is Err.none and joined.leader == joined.member_id  # it assigns
    # A group's members must share a protocol (Kafka's rule for client-side assignment).
    other = _join(bootstrap, group, "my-own-assignor", topic)
    assert other.error_code is Err.inconsistent_group_protocol
    assert _heartbeat(bootstrap, group, joined.member_id, joined.generation_id) is Err.none
    stale = _heartbeat(bootstrap, group, joined.member_id, joined.generation_id + 1)
    assert stale is Err.illegal_generation
    assert _heartbeat(bootstrap, group, "nobody", 1) is Err.unknown_member_id
    txn = FindCoordinatorRequestV2(key="tx", key_type=i8(1))
    answer = _call(bootstrap, 10, 2, txn, FindCoordinatorResponseV2)
    assert answer.error_code is Err.none  # every broker coordinates transactions too
