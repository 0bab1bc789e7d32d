"""The Python client against real brokers: byte-exact round trips, Kafka's partitioning,
offsets and seeks, the high watermark as the limit of what consumers see."""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from logformat.partitioner import partition_for_key
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for
from tierlog import Admin, ApiError, Consumer, ConsumerRecord, NoOffsetForPartition, Producer
from tierlog.client import TopicPartition


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module: each test has its own topics (but see the round trip)."""
    return module_broker


def consume_all(consumer: Consumer, count: int, timeout: float = 30) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        out.extend(consumer.poll(0.5))
    return out


def random_records(n: int, seed: int) -> list[tuple[bytes | None, bytes | None, list[Any]]]:
    rng = random.Random(seed)
    out: list[tuple[bytes | None, bytes | None, list[Any]]] = []
    for i in range(n):
        key = None if i % 5 == 0 else rng.randbytes(rng.randrange(0, 12))
        value = None if i % 17 == 0 else rng.randbytes(rng.randrange(0, 300))  # not UTF-8
        headers = [] if i % 3 else [("h", rng.randbytes(4)), ("h", None), ("ü", b"")]
        out.append((key, value, headers))
    return out


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_produce_consume_round_trip_is_byte_exact(
    broker_factory: object, compression: str | None
) -> None:
    assert callable(broker_factory)
    broker: BrokerProcess = broker_factory()  # its own broker: each run creates topic "rt"
    with Admin(broker.url) as admin:
        admin.create_topic("rt", partitions=3)
    sent = random_records(400, seed=11)
    with Producer(broker.url, compression_type=compression, linger_ms=2) as producer:
        futures = [
            producer.send("rt", value, key=key, headers=headers, timestamp_ms=1_700_000_000_000 + i)
            for i, (key, value, headers) in enumerate(sent)
        ]
        producer.flush()
        metadata = [f.result() for f in futures]
    for (key, _, _), md in zip(sent, metadata, strict=True):
        if key is not None:  # Kafka's partitioner: same key, same partition
            assert md.partition == partition_for_key(key, 3)
    with Consumer(broker.url, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("rt", p) for p in range(3)])
        got = consume_all(consumer, len(sent))
        assert consumer.poll(0.3) == []  # nothing more
    assert len(got) == len(sent)
    by_position = {(r.partition, r.offset): r for r in got}
    for i, ((key, value, headers), md) in enumerate(zip(sent, metadata, strict=True)):
        r = by_position[(md.partition, md.offset)]
        assert (r.key, r.value, r.headers) == (key, value, headers)
        assert r.timestamp == 1_700_000_000_000 + i
    for p in range(3):  # in offset order, per partition
        offsets = [r.offset for r in got if r.partition == p]
        assert offsets == sorted(offsets) == list(range(len(offsets)))


def test_null_keys_are_spread_and_explicit_partitions_win(broker: BrokerProcess) -> None:
    broker.create_topic("spread", partitions=4)
    with Producer(broker.url, batch_size=1000) as producer:
        futures = [producer.send("spread", b"x" * 100) for _ in range(400)]
        pinned = [producer.send("spread", b"p", key=b"k", partition=2) for _ in range(10)]
        producer.flush()
    used = {f.result().partition for f in futures}
    assert len(used) > 1  # sticky batches move on when they fill up
    assert {f.result().partition for f in pinned} == {2}


def test_positions_seeks_and_offset_lookups(broker: BrokerProcess) -> None:
    broker.create_topic("pos", partitions=1)
    tp = TopicPartition("pos", 0)
    with Producer(broker.url, linger_ms=0) as producer:
        for i in range(20):
            producer.send("pos", b"v%d" % i, timestamp_ms=1_000_000 + 1000 * i)
        producer.flush()
    with Consumer(broker.url, auto_offset_reset="latest") as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 20  # latest = the high watermark
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 20}
        consumer.seek(tp, 15)
        assert [r.value for r in consume_all(consumer, 5)] == [b"v%d" % i for i in range(15, 20)]
        consumer.seek_to_beginning()
        assert consume_all(consumer, 20)[0].value == b"v0"
        found = consumer.offsets_for_times({tp: 1_000_000 + 7500})
        assert found[tp] == (8, 1_000_000 + 8000)
        assert consumer.offsets_for_times({tp: 9_000_000}) == {tp: None}
        consumer.seek_to_end(tp)
        assert consumer.poll(0.2) == [] and consumer.position(tp) == 20
    with Consumer(broker.url, auto_offset_reset="none") as strict:
        strict.assign([tp])
        with pytest.raises(NoOffsetForPartition):
            strict.poll(0.1)


def test_poll_long_polls_for_new_records(broker: BrokerProcess) -> None:
    broker.create_topic("live", partitions=1)
    with Consumer(broker.url, auto_offset_reset="latest") as consumer:
        consumer.assign([TopicPartition("live", 0)])
        assert consumer.poll(0.2) == []
        with Producer(broker.url) as producer:
            producer.send("live", b"fresh").result(10)
        assert [r.value for r in consume_all(consumer, 1)] == [b"fresh"]


@pytest.fixture
def slow_cluster(fresh_db: str, tmp_path: Path) -> Iterator[Cluster]:
    # Long leases and replica lag: a paused follower stays in the ISR for the whole test,
    # so the high watermark stays where it was while the leader's log grows.
    c = Cluster(fresh_db, tmp_path, 2, ["--lease-ms", "60000", "--replica-lag-ms", "60000"])
    yield c.start()
    c.stop()


def test_consumers_never_see_records_above_the_high_watermark(slow_cluster: Cluster) -> None:
    c = slow_cluster
    admin = Admin(c.any().url)
    admin.create_topic("hw", partitions=1, replication_factor=2)
    wait_for("both replicas in the ISR", lambda: len(c.partition("hw")["isr"]) == 2)
    leader = c.leader("hw")
    follower = next(b for b in c.brokers.values() if b.broker_id != leader.broker_id)
    with Producer(leader.url, acks="all") as producer:
        for i in range(10):
            producer.send("hw", b"committed-%d" % i)
        producer.flush()
    follower.kill(signal.SIGSTOP)
    try:
        with Producer(leader.url, acks="1") as producer:
            tail = [producer.send("hw", b"uncommitted-%d" % i) for i in range(5)]
            producer.flush()
            assert [f.result().offset for f in tail] == list(range(10, 15))  # acknowledged
        info = c.partition("hw")
        assert info["log_end_offset"] == 15 and info["high_watermark"] == 10
        consumer = Consumer(leader.url, auto_offset_reset="earliest", fetch_max_wait_ms=200)
        consumer.assign([TopicPartition("hw", 0)])
        seen = consume_all(consumer, 10)
        deadline = time.monotonic() + 2  # keep polling: nothing past the HW may come
        while time.monotonic() < deadline:
            seen.extend(consumer.poll(0.3))
        assert [r.value for r in seen] == [b"committed-%d" % i for i in range(10)]
        assert consumer.highwater(TopicPartition("hw", 0)) == 10
    finally:
        follower.kill(signal.SIGCONT)
    # Once the follower catches up the high watermark moves and the rest is delivered.
    rest = consume_all(consumer, 5)
    assert [r.value for r in rest] == [b"uncommitted-%d" % i for i in range(5)]
    consumer.close()
    admin.close()


def test_admin_manages_topics(broker: BrokerProcess) -> None:
    with Admin(broker.url) as admin:
        created = admin.create_topic("adm", partitions=2, configs={"retention.ms": "3600000"})
        assert [p.partition for p in created.partitions] == [0, 1]
        assert ("adm", 2, 1) in admin.list_topics()
        altered = admin.alter_configs("adm", {"retention.ms": "60000", "segment.bytes": None})
        assert altered.configs["retention.ms"] == "60000"
        assert len(admin.create_partitions("adm", 5).partitions) == 5
        assert admin.describe_topic("adm").partitions[4].high_watermark == 0
        assert [b.url for b in admin.list_brokers()] == [broker.url]
        admin.delete_topic("adm")
        with pytest.raises(ApiError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            admin.describe_topic("adm")


class Recording(httpx.AsyncBaseTransport):
    """Notes which node each produce request went to."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.produce_hosts: list[tuple[int, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/records"):
            table = pa.ipc.open_stream(request.content).read_all()
            partition = table.column("partition")[0].as_py()
            self.produce_hosts.append((partition, f"http://{request.url.netloc.decode()}"))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def cluster(fresh_db: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(fresh_db, tmp_path, 3).start()
    yield c
    c.stop()


def test_producer_goes_to_leaders_and_survives_a_leader_failure(cluster: Cluster) -> None:
    c = cluster
    with Admin(c.brokers[1].url) as admin:
        admin.create_topic(
            "ha", partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"}
        )
    wait_for("full ISRs", lambda: all(len(p["isr"]) == 3 for p in c.describe("ha")["partitions"]))
    leaders = {p["partition"]: c.brokers[p["leader"]].url for p in c.describe("ha")["partitions"]}
    transport = Recording()
    urls = [b.url for b in c.brokers.values()]
    sent: dict[int, list[bytes]] = {p: [] for p in range(3)}
    with Producer(urls, transport=transport, request_timeout_ms=5000, linger_ms=2) as producer:
        first = [producer.send("ha", b"a%d" % i, key=b"%d" % i) for i in range(150)]
        producer.flush()
        # Straight to each partition's leader, not through a forwarding node.
        assert transport.produce_hosts and all(
            host == leaders[p] for p, host in transport.produce_hosts
        )
        victim = c.brokers[c.partition("ha", 0)["leader"]]
        victim.kill(signal.SIGKILL)
        second = [producer.send("ha", b"b%d" % i, key=b"%d" % i) for i in range(150)]
        producer.flush(60)
    for future, value in zip(
        first + second,
        [b"a%d" % i for i in range(150)] + [b"b%d" % i for i in range(150)],
        strict=True,
    ):
        sent[future.result().partition].append(value)
    survivor = c.any()
    for p in range(3):
        stored = [r["value"].encode() for r in survivor.fetch_all("ha", p, value_format="string")]
        assert stored == sent[p]  # nothing lost, nothing twice, in order
    assert c.partition("ha", 0)["leader"] != victim.broker_id
