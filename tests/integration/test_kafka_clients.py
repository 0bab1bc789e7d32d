"""Real Kafka clients against the broker's Kafka listener (issue 19): confluent-kafka
(librdkafka) and kcat, and records crossing between the Kafka and HTTP protocols."""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port


@pytest.fixture(scope="module")
def kafka_broker(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    data = tmp_path_factory.mktemp("kafka-broker") / "data-1"
    b = BrokerProcess(db_factory(), data, 1, ["--kafka-listen", f"127.0.0.1:{port}"])
    try:
        yield b.start(), f"127.0.0.1:{port}"
    finally:
        b.stop()


def _topic(broker: BrokerProcess, partitions: int = 1) -> str:
    name = f"k-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, partitions)
    return name


def _consume(bootstrap: str, topic: str, partition: int, count: int) -> list[Any]:
    """`count` records from offset 0 of one partition, by assignment (no group protocol)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",  # librdkafka wants one; assign() never joins a group
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        out: list[Any] = []
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF, (
                msg.error()
            )
            if msg.error() is None:
                out.append(msg)
        return out
    finally:
        c.close()


def _produce(bootstrap: str, topic: str, records: list[dict[str, Any]], **conf: Any) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[Any] = []
    for r in records:
        p.produce(topic, on_delivery=lambda err, _m: errors.append(err) if err else None, **r)
    assert p.flush(30) == 0
    assert errors == []


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
    _produce(
        bootstrap,
        topic,
        records,
        acks="all",
        **{"enable.idempotence": True, "compression.type": codec},
    )
    got = _consume(bootstrap, topic, 0, len(records))
    assert [m.offset() for m in got] == list(range(300))
    for m, r in zip(got, records, strict=True):
        assert (m.key(), m.value(), m.timestamp()[1]) == (r["key"], r["value"], r["timestamp"])
        assert m.headers() == r["headers"]


def test_kafka_to_http_byte_exact(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    raw = bytes(range(256))
    _produce(
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
    first, second = _consume(bootstrap, topic, 0, 2)
    assert (first.key(), first.value(), first.timestamp()[1]) == (raw, raw[:7], 99)
    assert first.headers() == [("x", raw[:3])]
    assert (second.offset(), second.key(), second.value(), second.headers()) == (
        1,
        None,
        None,
        None,
    )


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt: kcat)")
def test_kcat_produce_and_consume(kafka_broker: Any) -> None:
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
