"""Real Kafka clients against the broker's Kafka listener (issue 19): confluent-kafka
(librdkafka), kcat, kafka-python and aiokafka with each codec and acks level, records
crossing between the Kafka and HTTP protocols, history read from S3, topic admin. Requests
no client sends, and the listener's limits, are in test_kafka_wire.py."""

from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from coldstore.object_store import ObjectStoreConfig
from metadata.db import make_engine
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for
from tests.integration.fetch_nodes import s3_env
from tests.integration.kafka_clients import (
    MATRIX,
    PER_CELL,
    cell_value,
    check_cells,
    consume,
    produce,
    read_cells,
)
from tests.integration.ports import free_port
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tiering.worker import TieringWorker


@pytest.fixture(scope="module")
def kafka_s3(moto_s3: MotoServer) -> ObjectStoreConfig:
    return new_bucket(moto_s3)


@pytest.fixture(scope="module")
def kafka_broker(
    db_factory: Callable[..., str],
    tmp_path_factory: pytest.TempPathFactory,
    kafka_s3: ObjectStoreConfig,
) -> Iterator[tuple[BrokerProcess, str]]:
    """One broker for the module, with its Kafka listener and a cold tier in (moto) S3."""
    port = free_port()
    data = tmp_path_factory.mktemp("kafka-broker") / "data-1"
    args = ["--kafka-listen", f"127.0.0.1:{port}"]
    b = BrokerProcess(db_factory(), data, 1, args, env=s3_env(kafka_s3))
    try:
        yield b.start(), f"127.0.0.1:{port}"
    finally:
        b.stop()


def _topic(broker: BrokerProcess, partitions: int = 1) -> str:
    name = f"k-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, partitions)
    return name


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_producer_and_consumer(kafka_broker: Any, codec: str) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    records = [
        {
            "key": f"k{i}".encode(),
            "value": bytes([i % 256]) * (i % 50),
            "headers": [("h", f"v{i}".encode()), ("empty", None)],
            "timestamp": 1_700_000_000_000 + i,
            "partition": 0,
        }
        for i in range(300)
    ]
    produce(
        bootstrap,
        topic,
        records,
        acks="all",
        **{"enable.idempotence": True, "compression.type": codec},
    )
    got = consume(bootstrap, topic, 0, len(records))
    assert [m.offset() for m in got] == list(range(300))
    for m, r in zip(got, records, strict=True):
        assert (m.key(), m.value(), m.timestamp()[1]) == (r["key"], r["value"], r["timestamp"])
        assert m.headers() == r["headers"]


def test_kafka_to_http_byte_exact(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    raw = bytes(range(256))
    produce(
        bootstrap,
        topic,
        [{"key": raw, "value": raw[::-1], "headers": [("bin", raw)], "timestamp": 1234}],
        acks=1,
    )
    (rec,) = broker.fetch(topic, 0, 0, value_format="base64")["records"]
    assert rec["offset"] == 0
    assert base64.b64decode(rec["key_b64"]) == raw
    assert base64.b64decode(rec["value_b64"]) == raw[::-1]
    assert rec["timestamp"] == 1234
    assert rec["headers"] == [{"key": "bin", "value_b64": base64.b64encode(raw).decode()}]


def test_http_to_kafka_byte_exact(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    raw = bytes(range(255, -1, -1))
    broker.produce(
        topic,
        [
            {
                "key_b64": base64.b64encode(raw).decode(),
                "value_b64": base64.b64encode(raw[:7]).decode(),
                "headers": [{"key": "x", "value_b64": base64.b64encode(raw[:3]).decode()}],
                "timestamp": 99,
            },
            {"key": None, "value": None},
        ],
    )
    first, second = consume(bootstrap, topic, 0, 2)
    assert (first.key(), first.value(), first.timestamp()[1]) == (raw, raw[:7], 99)
    assert first.headers() == [("x", raw[:3])]
    assert (second.offset(), second.key(), second.value(), second.headers()) == (
        1,
        None,
        None,
        None,
    )


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt: kcat)")
def test_kcat_produce_andconsume(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker, partitions=2)
    lines = "".join(f"key{i}:value {i}\n" for i in range(20))
    subprocess.run(
        ["kcat", "-b", bootstrap, "-P", "-t", topic, "-K:", "-p", "1"],
        input=lines.encode(),
        check=True,
        timeout=30,
    )
    out = subprocess.run(
        [
            "kcat",
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-p",
            "1",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o %k=%s\n",
        ],
        capture_output=True,
        check=True,
        timeout=30,
    )
    assert out.stdout.decode().splitlines() == [f"{i} key{i}=value {i}" for i in range(20)]
    meta = subprocess.run(
        ["kcat", "-b", bootstrap, "-L", "-t", topic], capture_output=True, check=True, timeout=30
    )
    assert "2 partitions" in meta.stdout.decode()


# kafka-python reads its bundled schemas with a deprecated importlib call: its noise, not ours
@pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")
def test_kafka_python_client(kafka_broker: Any) -> None:
    """kafka-python (a pure-Python implementation of the protocol) negotiates its own
    versions: produce with gzip and read back by assignment."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip")
    for i in range(10):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    consumer.assign([KTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.close()
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(10)
    ]


def test_consume_history_that_is_only_in_s3(kafka_broker: Any, kafka_s3: ObjectStoreConfig) -> None:
    """Offsets below the hot log are served from the cold tier through the broker's cold read
    path: a consumer from offset 0 cannot tell the tiers apart."""
    broker, bootstrap = kafka_broker
    topic = f"cold-{uuid.uuid4().hex[:8]}"
    old = int(time.time() * 1000) - 3600_000  # local retention may delete it at once
    broker.create_topic(topic, 1, segment_bytes=4096, local_retention_ms=1000)
    values = [bytes([i % 256, 0, 0xFF]) * (50 + i) for i in range(90)]
    for i in range(0, 90, 3):
        broker.produce(
            topic,
            [
                {"value_b64": base64.b64encode(v).decode(), "timestamp": old + j}
                for j, v in enumerate(values[i : i + 3], i)
            ],
        )
    engine = make_engine(broker.database_url)
    worker = TieringWorker(engine, kafka_s3, "kafka-cold-worker")
    try:

        def hot_start() -> int | None:
            worker.run_once()
            start = broker.http.get(f"/topics/{topic}").json()["partitions"][0]["hot"]["start"]
            return int(start) if start >= 30 else None

        wait_for("the first segments tiered and deleted locally", hot_start, timeout=60, every=0.3)
    finally:
        worker.close()
        engine.dispose()
    got = consume(bootstrap, topic, 0, 90)
    assert [(m.offset(), m.value(), m.timestamp()[1]) for m in got] == [
        (i, v, old + i) for i, v in enumerate(values)
    ]


def test_admin_creates_and_deletes_topics(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"admin-{uuid.uuid4().hex[:8]}"
    new = NewTopic(name, num_partitions=2, replication_factor=1, config={"retention.ms": "60000"})
    admin.create_topics([new])[name].result(30)
    topic = broker.http.get(f"/topics/{name}").json()
    assert len(topic["partitions"]) == 2 and topic["configs"]["retention.ms"] == "60000"
    with pytest.raises(KafkaException) as err:  # tierlog's own message comes through
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    assert err.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    bad = NewTopic(f"{name}-x", 1, 1, config={"retention.ms": "soon"})
    with pytest.raises(KafkaException) as err:
        admin.create_topics([bad], validate_only=True)[f"{name}-x"].result(30)
    assert err.value.args[0].code() == KafkaError.INVALID_CONFIG
    admin.delete_topics([name])[name].result(30)
    assert broker.http.get(f"/topics/{name}").status_code == 404


def test_acks_zero_gets_no_response_and_writes(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    produce(bootstrap, topic, [{"value": b"%d" % i, "partition": 0} for i in range(50)], acks=0)
    wait_for("acks=0 records written", lambda: broker.fetch(topic)["high_watermark"] == 50)
    assert [m.value() for m in consume(bootstrap, topic, 0, 50)] == [b"%d" % i for i in range(50)]


@pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")
def test_list_offsets_by_time_answers_the_record_time(kafka_broker: Any) -> None:
    """ListOffsets by timestamp: the first record at or after it, with that record's own
    time (kafka-python's offsets_for_times shows both)."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    base = 1_700_000_000_000
    produce(
        bootstrap,
        topic,
        [{"value": b"v", "partition": 0, "timestamp": base + i * 10} for i in range(3)],
    )
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = KTopicPartition(topic, 0)
        found = consumer.offsets_for_times({tp: base + 5})[tp]
        assert (found.offset, found.timestamp) == (1, base + 10)
        assert consumer.offsets_for_times({tp: base + 100})[tp] is None  # all older
    finally:
        consumer.close()


# -- each codec and acks level, from each client: one partition per pair --------------------


def test_confluent_kafka_each_codec_and_acks(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker, len(MATRIX))
    for p, (codec, acks) in enumerate(MATRIX):
        records = [{"value": cell_value(p, i), "partition": p} for i in range(PER_CELL)]
        produce(bootstrap, topic, records, acks=acks, **{"compression.type": codec})
    check_cells(read_cells(bootstrap, topic), "confluent-kafka")


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt: kcat)")
def test_kcat_each_codec_and_acks(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker, len(MATRIX))
    for p, (codec, acks) in enumerate(MATRIX):
        lines = b"".join(cell_value(p, i) + b"\n" for i in range(PER_CELL))
        argv = ["kcat", "-b", bootstrap, "-P", "-t", topic, "-p", str(p), "-z", codec]
        subprocess.run([*argv, "-X", f"acks={acks}"], input=lines, check=True, timeout=30)
    check_cells(read_cells(bootstrap, topic), "kcat")


@pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")
def test_kafka_python_each_codec_and_acks(kafka_broker: Any) -> None:
    from kafka import KafkaProducer

    broker, bootstrap = kafka_broker
    topic = _topic(broker, len(MATRIX))
    for p, (codec, acks) in enumerate(MATRIX):
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all" if acks == -1 else acks,
            compression_type=None if codec == "none" else codec,
        )
        try:
            for i in range(PER_CELL):
                producer.send(topic, value=cell_value(p, i), partition=p)
            producer.flush(30)
        finally:
            producer.close()
    check_cells(read_cells(bootstrap, topic), "kafka-python")


def test_aiokafka_producer_and_group_consumer(kafka_broker: Any) -> None:
    """aiokafka (asyncio; its own protocol code): an idempotent acks=all producer with zstd,
    and a consumer group member that reads everything and commits, on the HTTP group store."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    broker, bootstrap = kafka_broker
    topic = _topic(broker, partitions=2)
    group = f"aio-{uuid.uuid4().hex[:8]}"
    sent = {b"aio %d" % i for i in range(40)}

    async def run() -> list[Any]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            compression_type="zstd",
        )
        await producer.start()
        try:
            for i in range(40):
                await producer.send(topic, value=b"aio %d" % i, key=b"k%d" % (i % 4))
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        got: list[Any] = []
        try:
            async with asyncio.timeout(30):
                while len(got) < len(sent):
                    for records in (await consumer.getmany(timeout_ms=200)).values():
                        got.extend(records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(run())
    assert {r.value for r in got} == sent and len(got) == len(sent)
    committed = broker.http.get(f"/groups/{group}/offsets").json()["offsets"]
    assert {(o["topic"], o["partition"]): o["offset"] for o in committed} == {
        (topic, p): sum(1 for r in got if r.partition == p) for p in (0, 1)
    }
