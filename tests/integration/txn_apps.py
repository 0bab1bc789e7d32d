"""Exactly-once applications for test_kafka_transactions.py, written with clients no one
here wrote: aiokafka's consume-transform-produce loop (send_offsets_to_transaction), and a
confluent-kafka reader at either isolation level."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition


async def aiokafka_transform(
    bootstrap: str, source: str, sink: str, group: str, tid: str, abort_first: bool
) -> int:
    """Read `source` in group `group` (read_committed), write each value upper-cased to
    `sink` and commit the input offsets in the same transaction, one transaction per poll.
    With `abort_first`, the first transaction is aborted and the loop stops there (a crash
    before commit, as far as the output and the offsets can tell). Records processed
    (with `abort_first`: records whose transaction was aborted)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    consumer = AIOKafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
    await consumer.start()
    await producer.start()
    done = 0
    try:
        async with asyncio.timeout(60):
            while True:
                batches = await consumer.getmany(timeout_ms=1000)
                if not batches:
                    return done
                offsets: dict[Any, int] = {}
                await producer.begin_transaction()
                for tp, records in batches.items():
                    for r in records:
                        await producer.send(sink, value=r.value.upper(), partition=r.partition)
                    offsets[TopicPartition(tp.topic, tp.partition)] = records[-1].offset + 1
                await producer.send_offsets_to_transaction(offsets, group)
                if abort_first:
                    await producer.abort_transaction()
                    return sum(len(rs) for rs in batches.values())
                await producer.commit_transaction()
                done += sum(len(rs) for rs in batches.values())
    finally:
        await producer.stop()
        await consumer.stop()


def read_all(
    bootstrap: str, topic: str, isolation: str, partitions: int = 1, until: int = 0
) -> list[Any]:
    """Everything readable at `isolation` from offset 0, read until every partition reports
    its end (and at least `until` records arrived)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 30
        while (len(at_end) < partitions or len(out) < until) and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            out.append(msg)
        assert len(at_end) == partitions, "the consumer never reached the end"
        return out
    finally:
        c.close()
