"""What Kafka's log admin APIs show of a broker's partitions: the active idempotent producers
of a partition it leads (DescribeProducers) and the bytes of the partitions in its data
directory (DescribeLogDirs). Read-only; the Kafka front-end (ingest/kafka/log_admin_apis.py)
encodes the answers."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, NamedTuple

from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicNamePartition

if TYPE_CHECKING:
    from ingest.broker import Broker

NO_TRANSACTION = -1  # current_txn_start_offset of a producer outside any transaction


class ActiveProducer(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int


class PartitionBytes(NamedTuple):
    partition: TopicNamePartition
    size: int  # bytes of its local segments
    lag: int  # offsets behind the leader's high watermark (0 on the leader)


class LogDir(NamedTuple):
    path: str
    partitions: tuple[PartitionBytes, ...]
    total_bytes: int
    usable_bytes: int


class LogAdmin:
    """The log admin answers of one broker (built once, in Services)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def active_producers(self, topic: str, partition: int) -> tuple[ActiveProducer, ...]:
        return active_producers(self._broker, topic, partition)

    def log_dir(self) -> LogDir:
        return log_dir(self._broker)


def active_producers(broker: Broker, topic: str, partition: int) -> tuple[ActiveProducer, ...]:
    """The partition's producer states, from its leader (NOT_LEADER_OR_FOLLOWER elsewhere)."""
    if broker.cache.topic(topic) is None:
        raise TierlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic!r}")
    state = broker.require_leader(topic, partition)
    return tuple(
        ActiveProducer(pid, e.epoch, e.last_seq, e.last_timestamp)
        for pid, e in sorted(state.producers.producers().items())
    )


def log_dir(broker: Broker) -> LogDir:
    """The broker's one data directory and its partitions (leaders and followers)."""
    rows = []
    for tp, state in sorted(broker.partitions.items()):
        size = sum(s.size for s in state.log.segments())
        lag = max(0, state.high_watermark - state.log.log_end_offset)
        rows.append(PartitionBytes(tp, size, lag))
    path = broker.config.data_dir
    usage = shutil.disk_usage(path)
    return LogDir(str(path.resolve()), tuple(rows), usage.total, usage.free)
