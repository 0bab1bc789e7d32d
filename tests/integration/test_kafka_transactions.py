"""Kafka transactions (issue 30) with a client no one here wrote: confluent-kafka's
(librdkafka's) transactional producer against a broker process. Commit and abort, what
read_committed and read_uncommitted consumers see, a zombie fenced, a transaction aborted
by its timeout, and the HTTP reader seeing committed records only."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as Assigned
from deltalake import DeltaTable

from coldstore.layout import table_uri
from coldstore.object_store import ObjectStoreConfig
from logformat.txn_rows import MARKER_HEADER
from metadata.db import make_engine
from spark_tables import hot
from tests.integration import kafka_txn_wire as wire
from tests.integration import txn_apps
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for
from tests.integration.fetch_nodes import s3_env
from tests.integration.ports import free_port
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tiering.worker import TieringWorker

with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, TopicPartition


@pytest.fixture(scope="module")
def txn_s3(moto_s3: MotoServer) -> ObjectStoreConfig:
    return new_bucket(moto_s3)


@pytest.fixture(scope="module")
def txn_broker(
    db_factory: Callable[..., str],
    tmp_path_factory: pytest.TempPathFactory,
    txn_s3: ObjectStoreConfig,
) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    data = tmp_path_factory.mktemp("txn-broker") / "data-1"
    args = ["--kafka-listen", f"127.0.0.1:{port}"]
    b = BrokerProcess(db_factory(), data, 1, args, env=s3_env(txn_s3))
    try:
        yield b.start(), f"127.0.0.1:{port}"
    finally:
        b.stop()


def _topic(broker: BrokerProcess, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, partitions)
    return name


def _producer(bootstrap: str, tid: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **conf})
    p.init_transactions(30)
    return p


def _send(p: Producer, topic: str, values: list[bytes], partition: int = 0) -> None:
    for v in values:
        p.produce(topic, v, partition=partition)
    p.flush(30)


def test_commit_and_abort_seen_by_each_isolation_level(txn_broker: Any) -> None:
    broker, bootstrap = txn_broker
    topic = _topic(broker, 2)
    p = _producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    committed = [f"c{i}".encode() for i in range(10)]
    aborted = [f"a{i}".encode() for i in range(5)]
    p.begin_transaction()
    _send(p, topic, committed[:5], 0)
    _send(p, topic, committed[5:], 1)
    p.commit_transaction(30)
    p.begin_transaction()
    _send(p, topic, aborted[:3], 0)
    _send(p, topic, aborted[3:], 1)
    p.abort_transaction(30)
    p.begin_transaction()
    _send(p, topic, [b"last"], 0)
    p.commit_transaction(30)

    seen = txn_apps.read_all(bootstrap, topic, "read_committed", 2, until=11)
    assert sorted(m.value() for m in seen) == sorted([*committed, b"last"])
    everything = txn_apps.read_all(bootstrap, topic, "read_uncommitted", 2, until=16)
    # aborted records are there for read_uncommitted; the markers never reach anyone
    assert sorted(m.value() for m in everything) == sorted([*committed, *aborted, b"last"])
    # the HTTP reader reads committed records by default
    http = broker.fetch(topic, 0, 0)["records"]
    assert [r["value"] for r in http] == [v.decode() for v in [*committed[:5], b"last"]]
    # and so does its search: "a" is in every aborted value, and in "last"
    assert _searched(broker, topic, "a") == ["last"]


def _searched(broker: BrokerProcess, topic: str, value: str) -> list[str]:
    got = httpx.get(f"{broker.url}/topics/{topic}/search", params={"value": value}, timeout=30)
    assert got.status_code == 200, got.text
    events = [json.loads(line) for line in got.text.splitlines() if line]
    return sorted(e["value"] for e in events if e["type"] == "hit")


def test_open_transaction_holds_back_read_committed(txn_broker: Any) -> None:
    broker, bootstrap = txn_broker
    topic = _topic(broker)
    tid = f"tx-{uuid.uuid4().hex[:6]}"
    p = _producer(bootstrap, tid)
    p.begin_transaction()
    _send(p, topic, [b"pending"])
    assert txn_apps.read_all(bootstrap, topic, "read_committed") == []
    assert _searched(broker, topic, "pending") == []  # past the last stable offset
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:  # the coordinator's store answers the transaction admin APIs
        described = admin.describe_transactions([tid])[tid]
        assert described.state == "Ongoing" and described.topic_partitions == {
            TopicPartition(topic, 0)
        }
        listed = [t.transactional_id for ts in admin.list_transactions().values() for t in ts]
        assert tid in listed
    finally:
        admin.close()
    assert [m.value() for m in txn_apps.read_all(bootstrap, topic, "read_uncommitted")] == [
        b"pending"
    ]
    p.commit_transaction(30)
    assert [m.value() for m in txn_apps.read_all(bootstrap, topic, "read_committed", until=1)] == [
        b"pending"
    ]


def test_spark_source_plans_to_the_last_stable_offset(txn_broker: Any) -> None:
    """The Spark source's plan (describe) and hot read stop at the last stable offset: a
    partition with a transaction open is read up to it, not failed with HotReadError."""
    broker, bootstrap = txn_broker
    topic = _topic(broker)
    p = _producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    p.begin_transaction()
    _send(p, topic, [b"c0", b"c1"])
    p.commit_transaction(30)  # offsets 0, 1 and the marker at 2
    p.begin_transaction()
    _send(p, topic, [b"open0", b"open1"])  # offsets 3, 4: open
    ends = hot.describe(broker.url, topic)[0]
    assert (ends.last_stable, ends.high_watermark) == (3, 5)
    got = hot.read_hot(broker.url, topic, 0, 0, ends.last_stable, lambda *_: iter(()))
    assert [v for b in got for v in b.column(3).to_pylist()] == [b"c0", b"c1"]
    p.abort_transaction(30)

    # EndTxn is answered once the abort is decided (as Kafka answers it); the coordinator
    # writes the marker after, and until it is in the last stable offset stays at 3.
    def past_marker() -> bool:
        return hot.describe(broker.url, topic)[0].last_stable == 6

    assert wait_for("the last stable offset past the abort's marker", past_marker, timeout=30)


def test_tiered_transactions_delta_and_kafka_read_committed(
    txn_broker: Any, txn_s3: ObjectStoreConfig
) -> None:
    """Committed and aborted transactions tiered: the Delta table (read with deltalake
    itself) holds exactly the committed records, and a read_committed consumer from offset 0
    (cold tier, then hot) still reads exactly them."""
    broker, bootstrap = txn_broker
    topic = f"t-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 1, segment_bytes=4096, local_retention_ms=1000)
    p = _producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    committed: list[bytes] = []
    for t in range(8):
        values = [f"{t}-{i}-".encode() + b"x" * 300 for i in range(6)]
        p.begin_transaction()
        _send(p, topic, values)
        if t % 3 == 1:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed.extend(values)
    engine = make_engine(broker.database_url)
    worker = TieringWorker(engine, txn_s3, "txn-tiering")
    try:

        def hot_start() -> int | None:
            worker.run_once()
            start = broker.http.get(f"/topics/{topic}").json()["partitions"][0]["hot"]["start"]
            return int(start) if start >= 20 else None

        wait_for("the first segments tiered and deleted locally", hot_start, timeout=60, every=0.3)
    finally:
        worker.close()
        engine.dispose()
    table = DeltaTable(table_uri(txn_s3, topic), storage_options=txn_s3.storage_options())
    rows = table.to_pyarrow_table(columns=["offset", "value", "headers"]).to_pylist()
    rows.sort(key=lambda r: r["offset"])
    marker = [r for r in rows if r["headers"] and r["headers"][0]["key"] == MARKER_HEADER]
    tiered = [r["value"] for r in rows if r not in marker]
    assert tiered and tiered == committed[: len(tiered)]  # no aborted record
    # markers only where a segment held nothing else (every aborted one's segment here)
    assert all(r["value"] == b"\x00\x00\x00\x00\x00\x00" for r in marker)
    got = txn_apps.read_all(bootstrap, topic, "read_committed", until=len(committed))
    assert [m.value() for m in got] == committed


def test_zombie_is_fenced_and_its_transaction_aborted(txn_broker: Any) -> None:
    broker, bootstrap = txn_broker
    topic = _topic(broker)
    tid = f"tx-{uuid.uuid4().hex[:6]}"
    zombie = _producer(bootstrap, tid)
    zombie.begin_transaction()
    _send(zombie, topic, [b"zombie"])
    successor = _producer(bootstrap, tid)  # the same id again: the zombie's epoch is fenced
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(30)
    assert info.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
    successor.begin_transaction()
    _send(successor, topic, [b"successor"])
    successor.commit_transaction(30)
    seen = txn_apps.read_all(bootstrap, topic, "read_committed", until=1)
    assert [m.value() for m in seen] == [b"successor"]


def test_timed_out_transaction_is_aborted_and_its_commit_refused(txn_broker: Any) -> None:
    broker, bootstrap = txn_broker
    topic = _topic(broker)
    p = _producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    _send(p, topic, [b"too slow"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the coordinator's sweeper aborts it
        if broker.fetch(topic, 0, 0).get("high_watermark", 0) >= 2:
            break
        time.sleep(0.1)
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    assert txn_apps.read_all(bootstrap, topic, "read_committed") == []


def test_bad_transactional_calls_get_kafkas_codes(txn_broker: Any) -> None:
    broker, bootstrap = txn_broker
    topic = _topic(broker)
    tid = f"tx-{uuid.uuid4().hex[:6]}"
    first = wire.init_producer(bootstrap, tid)
    assert first.error_code == 0
    pid, epoch = int(first.producer_id), int(first.producer_epoch)
    # KIP-890: a transactional produce to a partition not added to the transaction
    assert wire.produce_txn(bootstrap, topic, wire.txn_batch(pid, epoch, 0, b"x"), tid) == 48
    # EndTxn with nothing under way, and for a transactional id nobody initialized
    assert wire.end_txn(bootstrap, tid, pid, epoch, commit=True) == 48  # INVALID_TXN_STATE
    assert wire.end_txn(bootstrap, "nobody", pid, epoch, commit=True) == 49  # no such id
    assert wire.add_partition(bootstrap, tid, pid, epoch, topic) == 0
    assert wire.produce_txn(bootstrap, topic, wire.txn_batch(pid, epoch, 0, b"ok"), tid) == 0
    # a second InitProducerId aborts it, bumping the epoch (to fence), and bumps it again for
    # its own producer, as Kafka's coordinator does: the old epoch is stale everywhere
    second = wire.init_producer(bootstrap, tid)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (0, pid, epoch + 2)
    assert wire.produce_txn(bootstrap, topic, wire.txn_batch(pid, epoch, 1, b"z"), tid) == 47
    assert wire.add_partition(bootstrap, tid, pid, epoch, topic) == 90  # PRODUCER_FENCED
    assert wire.end_txn(bootstrap, tid, pid, epoch, commit=True) == 90
    # nothing of the aborted transaction, nor the refused records, is committed
    assert txn_apps.read_all(bootstrap, topic, "read_committed") == []
    assert [m.value() for m in txn_apps.read_all(bootstrap, topic, "read_uncommitted")] == [b"ok"]


def test_aiokafka_consume_transform_produce_is_exactly_once(txn_broker: Any) -> None:
    broker, bootstrap = txn_broker
    source, sink = _topic(broker, 2), _topic(broker, 2)
    group, tid = f"g-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    inputs = [f"v{i}".encode() for i in range(30)]
    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(inputs):
        p.produce(source, v, partition=i % 2)
    assert p.flush(30) == 0
    # a first run aborts its transaction: neither its output nor its offsets count
    assert asyncio.run(txn_apps.aiokafka_transform(bootstrap, source, sink, group, tid, True))
    assert broker.http.get(f"/groups/{group}/offsets").json()["offsets"] == []
    asyncio.run(txn_apps.aiokafka_transform(bootstrap, source, sink, group, tid, False))
    out = txn_apps.read_all(bootstrap, sink, "read_committed", 2, until=len(inputs))
    assert sorted(m.value() for m in out) == sorted(v.upper() for v in inputs)
    committed = broker.http.get(f"/groups/{group}/offsets").json()["offsets"]
    assert {(o["partition"], o["offset"]) for o in committed} == {(0, 15), (1, 15)}


def test_read_committed_position_passes_aborted_records_and_markers(txn_broker: Any) -> None:
    """A consumer whose partition ends with an aborted transaction (or any marker) reaches
    the partition's end: its position is the high watermark (quixstreams' state recovery
    waits for exactly that)."""
    broker, bootstrap = txn_broker
    topic = _topic(broker)
    p = _producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    p.begin_transaction()
    _send(p, topic, [b"gone-1", b"gone-2"])
    p.abort_transaction(30)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        c.assign([Assigned(topic, 0, 0)])

        def last_stable() -> int | None:
            # EndTxn is answered once the abort is decided (as Kafka answers it); the marker
            # is written after, and until then read_committed's end (the LSO) stays at 0.
            _, high = c.get_watermark_offsets(Assigned(topic, 0), timeout=10)
            return int(high) if high == 3 else None  # two records and the abort marker

        high = wait_for("the abort marker written", last_stable, timeout=30)

        def at_end() -> bool | None:
            assert c.poll(0.2) is None  # nothing to read
            return c.position([Assigned(topic, 0)])[0].offset == high or None

        wait_for("the consumer at the partition's end", at_end, timeout=30)
    finally:
        c.close()
