"""Kafka's DeleteRecords: move a partition's log start offset forward on its leader, so the
records below it are gone for every reader (Kafka's `ReplicaManager.deleteRecords`).

The leader raises its log start (persisted with the partition state) and drops the hot
segments wholly below it; followers raise theirs to the leader's when the next replica fetch
answer carries it (ingest/replication/replica_fetcher.py), as Kafka's followers do. The
low watermark answered is the leader's new log start (Kafka waits for the followers' too).

Refused as Kafka refuses: OFFSET_OUT_OF_RANGE above the high watermark, POLICY_VIOLATION on a
topic whose cleanup.policy lacks `delete`. A tiered topic is refused with POLICY_VIOLATION
too: its cold tier's log start is the first Parquet file's, which this does not move yet
(docs/kafka-apis.md)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from logformat.errors import ErrorCode, TierlogError

if TYPE_CHECKING:
    from ingest.broker import Broker

log = logging.getLogger("tierlog.delete_records")

HIGH_WATERMARK = -1  # Kafka's DeleteRecordsRequest.HIGH_WATERMARK: delete up to the HW


class RecordDeletion:
    """DeleteRecords on the partitions this broker leads (built once, in Services)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def delete_before(self, topic: str, partition: int, offset: int) -> int:
        """Make `offset` (HIGH_WATERMARK: the high watermark) the partition's log start;
        returns the low watermark (the log start after it). Blocks on disk: call off the
        event loop."""
        view = self._broker.cache.topic(topic)
        if view is None or not 0 <= partition < len(view.partitions):
            raise TierlogError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}"
            )
        state = self._broker.require_leader(topic, partition, write=True)
        if not view.config.delete:
            raise TierlogError(
                ErrorCode.POLICY_VIOLATION,
                f"records of {topic}-{partition} cannot be deleted: cleanup.policy lacks delete",
            )
        if view.config.remote_storage_enable:
            raise TierlogError(
                ErrorCode.POLICY_VIOLATION,
                f"records of {topic}-{partition} cannot be deleted: the topic is tiered",
            )
        hw = state.high_watermark
        target = hw if offset == HIGH_WATERMARK else offset
        if not 0 <= target <= hw:
            raise TierlogError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"cannot delete records of {topic}-{partition} before {offset}: "
                f"outside [0, high watermark {hw}]",
            )
        before = state.log.log_start_offset
        state.unified.advance_log_start(target)
        gone = state.unified.delete_segments_before(target)
        start = state.log.log_start_offset
        state.metrics.log_start_offset.labels(topic, str(partition)).set(start)
        if start != before:
            log.info(
                "records deleted",
                extra={
                    "topic": topic,
                    "partition": partition,
                    "node": self._broker.config.broker_id,
                    "log_start_offset": start,
                    "previous_log_start_offset": before,
                    "segments_deleted": len(gone),
                },
            )
        return start
