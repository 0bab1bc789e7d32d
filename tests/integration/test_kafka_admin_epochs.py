"""The Kafka APIs that complete the protocol (issue 19): UNSUPPORTED_VERSION answers, leader
epochs (fencing, divergence, OffsetForLeaderEpoch), the admin APIs through confluent-kafka's
AdminClient (transactions: test_kafka_transactions.py). One broker for the module."""

from __future__ import annotations

import io
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)
from kio.schema.fetch.v12 import request as fetch12
from kio.schema.fetch.v12.response import FetchResponse as FetchResponseV12
from kio.schema.fetch.v13 import request as fetch13
from kio.schema.fetch.v13.response import FetchResponse as FetchResponseV13
from kio.schema.metadata.v13 import request as metadata13
from kio.schema.metadata.v13.response import MetadataResponse as MetadataResponseV13
from kio.schema.offset_for_leader_epoch.v2 import request as ofle2
from kio.schema.offset_for_leader_epoch.v2.response import OffsetForLeaderEpochResponse
from kio.serial import entity_reader, entity_writer

from metadata.db import make_engine
from metadata.partition_state import PartitionStateRepo
from metadata.types import TopicIdPartition
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for
from tests.integration.ports import free_port

UNSUPPORTED_VERSION, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 35, 74, 75


@pytest.fixture(scope="module")
def kafka_broker(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    data = tmp_path_factory.mktemp("kafka-admin") / "data-1"
    b = BrokerProcess(db_factory(), data, 1, ["--kafka-listen", f"127.0.0.1:{port}"])
    try:
        yield b.start(), f"127.0.0.1:{port}"
    finally:
        b.stop()


def _topic(broker: BrokerProcess, partitions: int = 1) -> str:
    name = f"a-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, partitions)
    return name


def _frame(api_key: int, version: int, body: Any, correlation: int = 7) -> bytes:
    """A request with header v1, or v2 (empty tagged fields) for a flexible version."""
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    tags = b"\0" if type(body).__flexible__ else b""
    frame = struct.pack(">hhih", api_key, version, correlation, 1) + b"t" + tags + out.getvalue()
    return struct.pack(">i", len(frame)) + frame


def _exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def _recv(s: socket.socket) -> bytes:
    """One response frame, or b"" when the broker closed the connection."""
    head = _exactly(s, 4)
    return _exactly(s, struct.unpack(">i", head)[0]) if head else b""


def _call(bootstrap: str, api_key: int, version: int, body: Any, response: Any) -> Any:
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_frame(api_key, version, body))
        got = _recv(s)
    assert got, "the broker closed the connection"
    # After the correlation id, a flexible version's (empty) tagged fields.
    return entity_reader(response)(got, 5 if response.__flexible__ else 4)[0]


# -- 1. versions we do not serve are answered, in their own version ------------------------


def test_unsupported_versions_get_an_error_answer_on_a_live_connection(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    meta = metadata13.MetadataRequest(
        topics=(metadata13.MetadataRequestTopic(name=topic, topic_id=uuid.UUID(int=0)),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    fetch = fetch13.FetchRequest(
        max_wait=timedelta(0),
        min_bytes=1,
        topics=(
            fetch13.FetchTopic(
                topic_id=uuid.uuid4(),
                partitions=(
                    fetch13.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_frame(3, 13, meta, 1) + _frame(1, 13, fetch, 2))  # pipelined
        got_meta = entity_reader(MetadataResponseV13)(_recv(s), 5)[0]
        got_fetch = entity_reader(FetchResponseV13)(_recv(s), 5)[0]
        s.sendall(struct.pack(">ihhih", 11, 18, 0, 3, 1) + b"t")  # ApiVersions still served
        assert _recv(s)[:6] == struct.pack(">ih", 3, 0)
    assert got_meta.error_code == UNSUPPORTED_VERSION
    assert [(t.name, t.error_code) for t in got_meta.topics] == [(topic, UNSUPPORTED_VERSION)]
    assert got_fetch.error_code == UNSUPPORTED_VERSION
    (part,) = got_fetch.responses[0].partitions
    assert part.error_code == UNSUPPORTED_VERSION and part.records is None
    # Produce v2 is in no schema kio has (Kafka 4 dropped it): closed, the broker stays up.
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">ihhih", 13, 0, 2, 4, 1) + b"t\0\0")
        assert _recv(s) == b""
    assert broker.http.get("/readyz").status_code == 200


# -- 2. leader epochs ------------------------------------------------------------------------


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": "all"})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0


def _epoch_end(bootstrap: str, topic: str, epoch: int, current: int = -1) -> Any:
    part = ofle2.OffsetForLeaderPartition(
        partition=0, current_leader_epoch=current, leader_epoch=epoch
    )
    body = ofle2.OffsetForLeaderEpochRequest(
        topics=(ofle2.OffsetForLeaderTopic(topic=topic, partitions=(part,)),)
    )
    got = _call(bootstrap, 23, 2, body, OffsetForLeaderEpochResponse)
    return got.topics[0].partitions[0]


def _fetch(bootstrap: str, topic: str, offset: int, current: int, last: int = -1) -> Any:
    part = fetch12.FetchPartition(
        partition=0,
        current_leader_epoch=current,
        fetch_offset=offset,
        last_fetched_epoch=last,
        partition_max_bytes=1 << 20,
    )
    body = fetch12.FetchRequest(
        max_wait=timedelta(0),
        min_bytes=0,
        topics=(fetch12.FetchTopic(topic=topic, partitions=(part,)),),
        forgotten_topics_data=(),
    )
    got = _call(bootstrap, 1, 12, body, FetchResponseV12)
    return got.responses[0].partitions[0]


def _new_leader_epoch(broker: BrokerProcess, bootstrap: str, topic_id: str, topic: str) -> int:
    """Re-elect the same leader (as the controller does when the ISR's last member comes
    back): a new leader epoch the broker adopts from the metadata."""
    repo = PartitionStateRepo(make_engine(broker.database_url))
    tp = TopicIdPartition(topic_id, 0)
    rec = repo.get(tp)
    assert rec is not None and rec.leader == broker.broker_id
    assert repo.elect_leader(tp, rec.leader, [rec.leader], rec.partition_epoch) is not None
    new = rec.leader_epoch + 1
    wait_for(
        "the broker to lead in the new epoch",
        lambda: _epoch_end(bootstrap, topic, new, new).error_code == 0 or None,
    )
    return new


def test_leader_epochs_fence_diverge_and_end(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    name = f"a-{uuid.uuid4().hex[:8]}"
    topic_id = broker.create_topic(name, 1)["id"]
    _produce(bootstrap, name, [b"a", b"b", b"c"])  # offsets 0-2
    old = _epoch_end(bootstrap, name, 0).leader_epoch
    new = _new_leader_epoch(broker, bootstrap, topic_id, name)
    _produce(bootstrap, name, [b"d", b"e"])  # offsets 3-4 in the new epoch

    # OffsetForLeaderEpoch: the old epoch ended where the new one began; the latest at LEO.
    ended = _epoch_end(bootstrap, name, old)
    assert (ended.error_code, ended.leader_epoch, ended.end_offset) == (0, old, 3)
    assert _epoch_end(bootstrap, name, new).end_offset == 5
    assert _epoch_end(bootstrap, name, old, current=old).error_code == FENCED_LEADER_EPOCH

    # Fetch: a stale view of the leader is fenced, a newer one unknown, no records either way.
    stale = _fetch(bootstrap, name, 0, current=old)
    assert stale.error_code == FENCED_LEADER_EPOCH and not stale.records
    assert _fetch(bootstrap, name, 0, current=new + 1).error_code == UNKNOWN_LEADER_EPOCH
    # A consumer at offset 4 believing offset 3 was still the old epoch has diverged.
    diverged = _fetch(bootstrap, name, 4, current=new, last=old)
    assert diverged.error_code == 0 and not diverged.records
    assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (old, 3)

    # Each batch carries its epoch: librdkafka reports it per message.
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        c.assign([TopicPartition(name, 0, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg)
    finally:
        c.close()
    assert [(m.value(), m.leader_epoch()) for m in got] == [
        (b"a", old),
        (b"b", old),
        (b"c", old),
        (b"d", new),
        (b"e", new),
    ]


# -- 3. admin APIs through confluent-kafka's AdminClient --------------------------------------


def _error(future: Any) -> int:
    with pytest.raises(KafkaException) as got:
        future.result(timeout=30)
    return int(got.value.args[0].code())


def _alter(admin: AdminClient, topic: str, *entries: ConfigEntry) -> Any:
    res = ConfigResource("topic", topic, incremental_configs=list(entries))
    return admin.incremental_alter_configs([res])[res]


def test_describe_and_alter_configs(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource("topic", topic)
    configs = admin.describe_configs([res])[res].result(timeout=30)
    assert configs["retention.ms"].value == "604800000" and configs["retention.ms"].is_default
    me = ConfigResource("broker", "1")
    mine = admin.describe_configs([me])[me].result(timeout=30)
    assert mine["broker.id"].value == "1" and mine["broker.id"].is_read_only
    assert mine["advertised.listeners"].value == f"PLAINTEXT://{bootstrap}"

    set_ = AlterConfigOpType.SET
    _alter(
        admin,
        topic,
        ConfigEntry("retention.ms", "3600000", incremental_operation=set_),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ).result(timeout=30)
    now = broker.http.get(f"/topics/{topic}").json()["configs"]
    assert (now["retention.ms"], now["cleanup.policy"]) == ("3600000", "compact,delete")
    configs = admin.describe_configs([res])[res].result(timeout=30)
    assert configs["retention.ms"].value == "3600000" and not configs["retention.ms"].is_default

    # Validated as HTTP's PATCH validates; APPEND/SUBTRACT only on list configs.
    invalid = KafkaError.INVALID_CONFIG
    assert (
        _error(
            _alter(admin, topic, ConfigEntry("retention.ms", "soon", incremental_operation=set_))
        )
        == invalid
    )
    assert (
        _error(_alter(admin, topic, ConfigEntry("no.such", "1", incremental_operation=set_)))
        == invalid
    )
    append = AlterConfigOpType.APPEND
    assert (
        _error(_alter(admin, topic, ConfigEntry("retention.ms", "1", incremental_operation=append)))
        == invalid
    )
    _alter(
        admin,
        topic,
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ).result(timeout=30)
    assert broker.http.get(f"/topics/{topic}").json()["configs"]["retention.ms"] == "604800000"
    checked = ConfigResource(
        "topic",
        topic,
        incremental_configs=[ConfigEntry("retention.ms", "1", incremental_operation=set_)],
    )
    admin.incremental_alter_configs([checked], validate_only=True)[checked].result(timeout=30)
    assert broker.http.get(f"/topics/{topic}").json()["configs"]["retention.ms"] == "604800000"
    too_many = ConfigResource(
        "topic",
        topic,
        incremental_configs=[ConfigEntry("min.insync.replicas", "2", incremental_operation=set_)],
    )  # more than the replication factor: refused by the same check as a write
    assert (
        _error(admin.incremental_alter_configs([too_many], validate_only=True)[too_many]) == invalid
    )
    read_only = ConfigResource(
        "broker",
        "1",
        incremental_configs=[ConfigEntry("num.partitions", "3", incremental_operation=set_)],
    )
    assert (
        _error(admin.incremental_alter_configs([read_only])[read_only])
        == KafkaError.INVALID_REQUEST
    )


def test_create_partitions_and_describe_cluster(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)
    assert len(broker.http.get(f"/topics/{topic}").json()["partitions"]) == 3
    checked = admin.create_partitions([NewPartitions(topic, 5)], validate_only=True)[topic]
    checked.result(timeout=30)
    assert len(broker.http.get(f"/topics/{topic}").json()["partitions"]) == 3  # only checked
    shrink = admin.create_partitions([NewPartitions(topic, 2)])[topic]
    assert _error(shrink) == KafkaError.INVALID_PARTITIONS
    unknown = admin.create_partitions([NewPartitions("no-such-topic", 2)])["no-such-topic"]
    assert _error(unknown) == KafkaError.UNKNOWN_TOPIC_OR_PART

    cluster = admin.describe_cluster(request_timeout=30).result(timeout=30)
    real_id = PartitionStateRepo(make_engine(broker.database_url)).cluster_id()
    assert cluster.cluster_id == real_id
    assert cluster.controller.id == broker.broker_id  # the lease holder, the only broker
    assert [(n.id, f"{n.host}:{n.port}") for n in cluster.nodes] == [(1, bootstrap)]
    metadata = admin.list_topics(timeout=30)  # Metadata names the same controller and id
    assert (metadata.cluster_id, metadata.controller_id) == (real_id, broker.broker_id)
