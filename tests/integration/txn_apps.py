"""Exactly-once applications for test_kafka_transactions.py, written with clients no one
here wrote: aiokafka's consume-transform-produce loop (send_offsets_to_transaction)."""

from __future__ import annotations

import asyncio
from typing import Any


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
