"""Client-side assignment (issue 30): a group of Kafka clients elects a leader that runs the
clients' own assignor, whatever its name, and what the leader sends is what every member
receives, user data included (groups/client_assigned.py)."""

from __future__ import annotations

import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolAssignment,
        ConsumerProtocolSubscription,
    )

from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port

PARTITIONS = 4


@pytest.fixture(scope="module")
def kafka_broker(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    data = tmp_path_factory.mktemp("kafka-assignors") / "data-1"
    b = BrokerProcess(db_factory(), data, 1, ["--kafka-listen", f"127.0.0.1:{port}"])
    try:
        yield b.start(), f"127.0.0.1:{port}"
    finally:
        b.stop()


class EverythingToTheLast(AbstractPartitionAssignor):  # type: ignore[misc]
    """An assignor no broker knows: every partition to the member whose note sorts last,
    and to each member, as user data, the notes the leader saw from all members."""

    name = "tierlog-test-everything-to-the-last"
    version = 0

    def __init__(self, note: bytes) -> None:
        self.note = note
        self.received: list[tuple[set[tuple[str, int]], bytes, int]] = []
        self.seen_as_leader: list[dict[str, bytes]] = []

    def metadata(self, topics: Any) -> Any:
        return ConsumerProtocolSubscription(self.version, sorted(topics), self.note)

    def assign(self, cluster: Any, members: Any) -> dict[str, Any]:
        notes = {m.member_id: bytes(m.metadata.user_data) for m in members}
        self.seen_as_leader.append(notes)
        last = max(notes, key=lambda mid: notes[mid])
        topics = sorted({t for m in members for t in m.metadata.topics})
        everything = [(t, list(range(PARTITIONS))) for t in topics]  # the test's topics
        seen = b"|".join(sorted(notes.values()))
        return {
            mid: ConsumerProtocolAssignment(
                self.version, everything if mid == last else [], b"for " + notes[mid] + b": " + seen
            )
            for mid in notes
        }

    def on_assignment(self, assignment: Any, generation: int) -> None:
        got = {(tp.topic, tp.partition) for tp in assignment.partitions()}
        self.received.append((got, bytes(assignment.user_data), generation))


class Member:
    """A kafka-python consumer polling in its own thread (a join waits for the others)."""

    def __init__(
        self, bootstrap: str, group: str, topic: str, note: bytes, custom: bool = True
    ) -> None:
        self.assignor = EverythingToTheLast(note)
        strategies: list[Any] = [self.assignor] if custom else [RangePartitionAssignor]
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=200,
            # Not 6 s: on CI's loaded cores kafka-python's own loop stalled up to 1.1 s at a
            # time, members were evicted and rejoined, and one generation took over 30 s.
            session_timeout_ms=15000,
            partition_assignment_strategy=strategies,
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            # Not 100 ms: kafka-python 3.0.12 drops a join whose answer comes after poll()
            # returned on its timeout and joins again (the broker answers a follower's repeat
            # with its generation, as Kafka does, but a leader's opens a new round); a member
            # then closes up to a second after it is told to.
            self.consumer.poll(timeout_ms=1000)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()


def _until(done: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_custom_assignor_s_assignment_and_user_data_arrive_intact(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic, group = f"ca-{uuid.uuid4().hex[:8]}", f"cg-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, PARTITIONS)
    everything = {(topic, p) for p in range(PARTITIONS)}
    a = Member(bootstrap, group, topic, b"note-a")
    b = None
    try:
        _until(lambda: bool(a.assignor.received), "the first member's assignment")
        assert a.assignor.received[-1][:2] == (everything, b"for note-a: note-a")
        b = Member(bootstrap, group, topic, b"note-b")
        # Both in one generation, as the leader (whichever it is) decided.
        _until(
            lambda: (
                bool(b.assignor.received)
                and a.assignor.received[-1][2] == b.assignor.received[-1][2]
            ),
            "both members in one generation",
        )
        leader = a.assignor if a.assignor.seen_as_leader[1:] else b.assignor
        assert set(leader.seen_as_leader[-1].values()) == {b"note-a", b"note-b"}
        assert a.assignor.received[-1][:2] == (set(), b"for note-a: note-a|note-b")
        assert b.assignor.received[-1][:2] == (everything, b"for note-b: note-a|note-b")
        # The last to own everything leaves: the other is given everything.
        b.close()
        b = None
        _until(
            lambda: a.assignor.received[-1][:2] == (everything, b"for note-a: note-a"),
            "the remaining member's assignment after the other left",
        )
    finally:
        a.close()
        if b is not None:
            b.close()


def test_an_http_member_meets_a_group_of_kafka_clients(kafka_broker: Any) -> None:
    """The HTTP member is granted only what no Kafka member holds; the Kafka member rejoins
    under the broker's assignment, and after the HTTP member leaves assigns itself again.
    At no step do the two hold one partition together."""
    broker, bootstrap = kafka_broker
    topic, group = f"ca-{uuid.uuid4().hex[:8]}", f"cg-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, PARTITIONS)
    everything = {(topic, p) for p in range(PARTITIONS)}
    kafka = Member(bootstrap, group, topic, b"k", custom=False)
    try:

        def held() -> set[tuple[str, int]]:
            return {(tp.topic, tp.partition) for tp in kafka.consumer.assignment()}

        _until(lambda: held() == everything, "the Kafka member assigns itself everything")
        joined = broker.http.post(
            f"/groups/{group}/members", json={"topics": [topic], "session_timeout_ms": 10_000}
        ).json()
        member, epoch = joined["member_id"], joined["member_epoch"]
        mine = {(t, p) for t, ps in joined["assignment"].items() for p in ps}
        deadline = time.monotonic() + 30
        while not (mine and held() and mine | held() == everything):
            assert not mine & held(), (mine, held())
            assert time.monotonic() < deadline, (mine, held())
            owned: dict[str, list[int]] = {}
            for t, p in mine:
                owned.setdefault(t, []).append(p)
            beat = broker.http.post(
                f"/groups/{group}/members/{member}/heartbeat",
                json={"member_epoch": epoch, "owned": owned},
            ).json()
            epoch = beat["member_epoch"]
            mine = {(t, p) for t, ps in beat["assignment"].items() for p in ps}
            time.sleep(0.1)
        broker.http.delete(f"/groups/{group}/members/{member}")
        _until(lambda: held() == everything, "the Kafka member assigns itself again")
    finally:
        kafka.close()
