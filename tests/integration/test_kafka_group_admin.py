"""Kafka's admin APIs (issue 30) from confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient: ListGroups, DescribeGroups, DeleteGroups and OffsetDelete on a group a real
consumer is in; DescribeProducers, DescribeLogDirs and ListTransactions (kafka-python:
confluent-kafka's AdminClient has no call for them)."""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
)
from confluent_kafka.admin import AdminClient

from tests.integration.cluster import Cluster

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
        got += sum(len(r) for r in consumer.poll(timeout_ms=200).values())
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
