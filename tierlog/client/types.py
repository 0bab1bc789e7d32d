"""The small value types the client hands out and takes (Kafka's names, Python tuples);
ConsumerRecord, a view of fetched Arrow rows, is in consumer_records."""

from __future__ import annotations

from typing import NamedTuple

Header = tuple[str, bytes | None]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed. `offset` is -1 with acks=0 (nobody waited)."""

    topic: str
    partition: int
    offset: int
    timestamp: int  # ms since the epoch, as sent (CreateTime)


class OffsetAndMetadata(NamedTuple):
    """A committed position: the offset of the NEXT record to read, as in Kafka."""

    offset: int
    metadata: str = ""


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
