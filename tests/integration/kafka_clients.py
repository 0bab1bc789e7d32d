"""Kafka clients' produce and consume helpers for test_kafka_clients.py: one partition read by
assignment, a producer flushed and checked, and the codec x acks matrix (one partition per
pair, repetitive values every codec really compresses) read back and compared."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = (0, 1, -1)
# Each (codec, acks) pair writes to its own partition of one topic: one topic, one read-back.
MATRIX = [(codec, acks) for codec in CODECS for acks in ACKS]
PER_CELL = 20  # records per (codec, acks) pair


def consume(bootstrap: str, topic: str, partition: int, count: int) -> list[Any]:
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


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]], **conf: Any) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[Any] = []
    for r in records:
        p.produce(topic, on_delivery=lambda err, _m: errors.append(err) if err else None, **r)
    assert p.flush(30) == 0
    assert errors == []


def cell_value(p: int, i: int) -> bytes:
    return b"cell %d record %d " % (p, i) * 4  # repetitive: every codec really compresses


def read_cells(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """Every partition of the matrix topic from offset 0, by assignment."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    got: dict[int, list[bytes]] = {p: [] for p in range(len(MATRIX))}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(len(MATRIX))])
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < len(MATRIX) * PER_CELL:
            assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got[msg.partition()].append(msg.value())
    finally:
        c.close()
    return got


def check_cells(got: dict[int, list[bytes]], client: str) -> None:
    for p, (codec, acks) in enumerate(MATRIX):
        want = [cell_value(p, i) for i in range(PER_CELL)]
        assert got[p] == want, f"{client}, compression {codec}, acks {acks}"
