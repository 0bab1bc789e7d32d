"""Kafka's admin APIs (issue 30) from confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient: ListGroups, DescribeGroups, DeleteGroups and OffsetDelete on a group a real
consumer is in; DescribeProducers, DescribeLogDirs and ListTransactions (kafka-python:
confluent-kafka's AdminClient has no call for them); DeleteRecords and ElectLeaders from
both clients."""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as Partition
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for

with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka import errors as kafka_errors

PARTITIONS = 3


@pytest.fixture(scope="module")
def kafka_broker(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, str]]:
    """Two brokers: tools ask each of them for its groups and add the answers up."""
    c = Cluster(db_factory(), tmp_path_factory.mktemp("kafka-group-admin"), 2, kafka=True)
    try:
        yield c.start(), c.bootstrap()
    finally:
        c.stop()


def _consumed_and_committed(bootstrap: str, group: str, topic: str) -> Any:
    """A live member that read every record and committed."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(6):
        producer.send(topic, b"v%d" % i, partition=i % PARTITIONS)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=200,
    )
    got = 0
    deadline = time.monotonic() + 30
    while got < 6:
        assert time.monotonic() < deadline, got
        # A long poll: kafka-python 3.0.12 never finishes a rejoin whose SyncGroup answer
        # arrives after a poll() returned on its timeout (no heartbeat, no OffsetFetch
        # after it: seen under load); poll() returns as soon as records arrive.
        got += sum(len(r) for r in consumer.poll(timeout_ms=5000).values())
    consumer.commit()
    return consumer


def _result(future: Any) -> Any:
    return future.result(timeout=30)


def test_groups_are_listed_described_and_deleted(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic, group = f"ga-{uuid.uuid4().hex[:8]}", f"gg-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, PARTITIONS, rf=2)
    consumer = _consumed_and_committed(bootstrap, group, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    py_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = _result(admin.list_consumer_groups(request_timeout=30))
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1 and mine[0].state == ConsumerGroupState.STABLE
        assert not mine[0].is_simple_consumer_group
        described = _result(admin.describe_consumer_groups([group])[group])
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"  # kafka-python's first protocol
        [member] = described.members
        got = {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions}
        assert got == {(topic, p) for p in range(PARTITIONS)}

        py_listed = [g for g in py_admin.list_groups() if g["group_id"] == group]
        assert len(py_listed) == 1 and py_listed[0]["protocol_type"] == "consumer"
        py_described = py_admin.describe_groups([group])[group]
        assert py_described["group_state"] == "Stable"
        assert len(py_described["members"]) == 1

        # A live member: the group stays, and so do its topic's offsets.
        with pytest.raises(KafkaException) as busy:
            _result(admin.delete_consumer_groups([group])[group])
        assert busy.value.args[0].name() == "NON_EMPTY_GROUP"
        kept = py_admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
        assert kept[TopicPartition(topic, 0)] is kafka_errors.GroupSubscribedToTopicError
    finally:
        consumer.close()
    # Empty now: an offset goes, then the group.
    gone = py_admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
    assert gone[TopicPartition(topic, 0)] is kafka_errors.NoError
    offsets = _result(
        admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    )
    committed = {tp.partition: tp.offset for tp in offsets.topic_partitions}
    assert committed == {1: 2, 2: 2}
    assert _result(admin.describe_consumer_groups([group])[group]).state == (
        ConsumerGroupState.EMPTY
    )
    _result(admin.delete_consumer_groups([group])[group])
    assert py_admin.describe_groups([group])[group]["group_state"] == "Dead"
    assert group not in {g.group_id for g in _result(admin.list_consumer_groups()).valid}
    assert py_admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
    with pytest.raises(kafka_errors.GroupIdNotFoundError):
        py_admin.delete_group_offsets(group, [TopicPartition(topic, 1)])
    py_admin.close()


def test_producers_and_log_dirs_are_described(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = f"gl-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, PARTITIONS, rf=2)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(5):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    py_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    leader = broker.any().http.get(f"/topics/{topic}").json()["partitions"][0]["leader"]
    try:
        states = py_admin.describe_producers([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        [active] = states[TopicPartition(topic, 0)].active_producers
        assert active.last_sequence == 4 and active.producer_epoch == 0
        assert active.current_transaction_start_offset == -1  # no transaction
        assert states[TopicPartition(topic, 1)].active_producers == []
        answers = py_admin.describe_log_dirs({topic: [0, 1]})
        assert sorted(a["broker"] for a in answers) == [1, 2]
        for answer in answers:  # both brokers hold a replica of each partition
            [log_dir] = answer["log_dirs"]
            assert log_dir["error_code"] == 0 and log_dir["total_bytes"] > 0
            [described] = log_dir["topics"]
            sizes = {p["partition_index"]: p["partition_size"] for p in described["partitions"]}
            assert set(sizes) == {0, 1} and sizes[1] == 0, answer
            assert sizes[0] > 0 or answer["broker"] != leader, answer
        # No transaction begun in this cluster: none to list (ListTransactions answers).
        assert all(listed == [] for listed in py_admin.list_transactions().values())
    finally:
        py_admin.close()


def _log_start(broker: BrokerProcess, topic: str, partition: int) -> float | None:
    """The log start the broker's /metrics shows for its replica of the partition."""
    for family in text_string_to_metric_families(broker.http.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "tierlog_log_start_offset" and sample.labels == {
                "topic": topic,
                "partition": str(partition),
            }:
                return sample.value
    return None


def _read_all(bootstrap: str, topic: str, partition: int, count: int) -> list[int]:
    """The offsets a consumer from the beginning of the partition reads (`count` of them)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dr-{uuid.uuid4().hex[:6]}"})
    consumer.assign([Partition(topic, partition, OFFSET_BEGINNING)])
    offsets: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while len(offsets) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                offsets.append(msg.offset())
        low_high = consumer.get_watermark_offsets(Partition(topic, partition), timeout=10)
    finally:
        consumer.close()
    return [*offsets, *low_high]


def test_delete_records_moves_the_log_start_on_leader_and_follower(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = f"gd-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2, rf=2, remote_storage_enable="false")  # tiered: its own file
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, value=b"v%d" % i, partition=0)
        producer.flush(30)  # one batch each: the new start falls between batches and within
    for i in range(4):
        producer.produce(topic, value=b"w%d" % i, partition=1)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([Partition(topic, 0, 6), Partition(topic, 1, -1)])
    lows = {tp.partition: f.result(30).low_watermark for tp, f in futures.items()}
    assert lows == {0: 6, 1: 4}  # -1: up to the high watermark
    # A consumer from the beginning starts at the new log start; the low watermark moved.
    assert _read_all(bootstrap, topic, 0, 4) == [6, 7, 8, 9, 6, 10]
    leader = broker.partition(topic, 0)["leader"]
    [follower] = [b for i, b in broker.brokers.items() if i != leader]
    wait_for("the follower's log start", lambda: _log_start(follower, topic, 0) == 6)

    py_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        got = py_admin.delete_records({TopicPartition(topic, 0): 8})
        assert got[TopicPartition(topic, 0)]["low_watermark"] == 8
        with pytest.raises(kafka_errors.OffsetOutOfRangeError):  # beyond the high watermark
            py_admin.delete_records({TopicPartition(topic, 0): 11})
        with pytest.raises(kafka_errors.OffsetOutOfRangeError):
            py_admin.delete_records({TopicPartition(topic, 0): -2})
        # A lower offset than the log start deletes nothing more.
        got = py_admin.delete_records({TopicPartition(topic, 0): 3})
        assert got[TopicPartition(topic, 0)]["low_watermark"] == 8
    finally:
        py_admin.close()
    wait_for("the follower's log start", lambda: _log_start(follower, topic, 0) == 8)
    assert _read_all(bootstrap, topic, 0, 2) == [8, 9, 8, 10]

    compacted = f"gc-{uuid.uuid4().hex[:8]}"
    broker.create_topic(compacted, 1, rf=2, cleanup_policy="compact", remote_storage_enable="false")

    def refusal() -> Any:  # UNKNOWN_TOPIC_OR_PART (retriable) until its leader knows it
        [future] = admin.delete_records([Partition(compacted, 0, 0)]).values()
        with pytest.raises(KafkaException) as refused:
            future.result(30)
        error = refused.value.args[0]
        return None if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART else error

    refused = wait_for("a refusal from the new topic's leader", refusal, timeout=60)
    assert refused.code() == KafkaError.POLICY_VIOLATION
    [future] = admin.delete_records([Partition("no-such-topic", 0, 0)]).values()
    with pytest.raises(KafkaException):
        future.result(30)


def _election_codes(got: dict[Any, Any]) -> dict[int, int | None]:
    """Each partition's error code (None: elected); librdkafka gives KafkaError objects."""
    return {tp.partition: (None if e is None else e.code()) for tp, e in got.items()}


def test_leaders_are_elected_as_kafka_answers(kafka_broker: Any) -> None:
    """Last in the file: it stops a broker (and starts it again)."""
    broker, bootstrap = kafka_broker
    topic = f"ge-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2, rf=2)
    for p in (0, 1):  # the preferred replica leads (the mover sees to it)
        wait_for(
            "the preferred leader",
            lambda p=p: (
                broker.partition(topic, p)["leader"] == (broker.partition(topic, p)["replicas"][0])
            ),
        )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    asked = [Partition(topic, 0), Partition(topic, 1), Partition(topic, 7)]
    got = admin.elect_leaders(ElectionType.PREFERRED, asked).result(60)
    not_needed, unknown = KafkaError.ELECTION_NOT_NEEDED, KafkaError.UNKNOWN_TOPIC_OR_PART
    assert _election_codes(got) == {0: not_needed, 1: not_needed, 7: unknown}
    got = admin.elect_leaders(ElectionType.UNCLEAN, asked[:1]).result(60)
    assert _election_codes(got) == {0: not_needed}  # it has a leader

    # The preferred replica down: the other leads, and a preferred election cannot happen.
    preferred = broker.partition(topic, 0)["replicas"][0]
    down = broker.brokers[preferred]
    down.stop()
    try:

        def moved() -> bool:
            now = broker.partition(topic, 0)
            return now["leader"] not in (None, preferred) and preferred not in now["isr"]

        wait_for("the other replica leads, alone in the ISR", moved, timeout=60)
        others = {i: b for i, b in broker.brokers.items() if i != preferred}
        alive = ",".join(f"127.0.0.1:{broker.kafka_ports[i]}" for i in others)
        admin = AdminClient({"bootstrap.servers": alive})
        # ElectLeaders goes to the controller Metadata names: a live broker it lists (a
        # stopped one named kept librdkafka waiting for it until the call timed out). A
        # cleanly stopped broker is not listed (kafka-python's admin fails on one that is).
        cluster = admin.list_topics(timeout=30)
        assert preferred not in cluster.brokers and cluster.controller_id in others
        got = admin.elect_leaders(ElectionType.PREFERRED, asked[:1]).result(60)
        assert _election_codes(got) == {0: KafkaError.PREFERRED_LEADER_NOT_AVAILABLE}
        py_admin = KafkaAdminClient(bootstrap_servers=alive)
        try:
            with pytest.raises(kafka_errors.PreferredLeaderNotAvailableError):
                py_admin.elect_leaders(0, {topic: [0]})
        finally:
            py_admin.close()
    finally:
        down.start()
    # Back in the ISR, it leads again (the preferred-leader mover, which ElectLeaders awaits).
    wait_for(
        "the preferred leader back",
        lambda: broker.partition(topic, 0)["leader"] == preferred,
        timeout=60,
    )
