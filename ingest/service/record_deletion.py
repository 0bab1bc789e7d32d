"""Kafka's DeleteRecords: move a partition's log start offset forward on its leader, so the
records below it are gone for every reader (Kafka's `ReplicaManager.deleteRecords`).

The leader raises its log start (persisted with the partition state) and drops the hot
segments wholly below it; followers raise theirs to the leader's when the next replica fetch
answer carries it (ingest/replication/replica_fetcher.py), as Kafka's followers do. The
low watermark answered is the leader's new log start (Kafka waits for the followers' too).

On a tiered topic the log start is cross-tier, as in Kafka's tiered storage: it is stored
in Postgres first (metadata/log_starts.py), so it outlives this leader, then the leader's
hot log start follows. Cold reads refuse offsets below it at once on this broker (its cold
range is read again) and within the cold range cache's second elsewhere; every replica's
local retention raises its hot log start to it and deletes the segments wholly below it once
they are tiered (the tiering worker copies whole segments in order, so an untiered one
stays); the compaction worker removes the cold files wholly below it, from the Delta table
too (compaction/plan.py), as Kafka's RLMExpirationTask deletes remote segments.

Refused as Kafka refuses: OFFSET_OUT_OF_RANGE above the high watermark, POLICY_VIOLATION on a
topic whose cleanup.policy lacks `delete`."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ingest.replication.partition import Partition
from ingest.tiered.tiered_fetch import log_start
from logformat.errors import ErrorCode, TierlogError
from metadata.log_starts import LogStarts

if TYPE_CHECKING:
    from ingest.broker import Broker

log = logging.getLogger("tierlog.delete_records")

HIGH_WATERMARK = -1  # Kafka's DeleteRecordsRequest.HIGH_WATERMARK: delete up to the HW


class RecordDeletion:
    """DeleteRecords on the partitions this broker leads (built once, in Services)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._log_starts = LogStarts(broker.engine)

    async def delete_before(self, topic: str, partition: int, offset: int) -> int:
        """Make `offset` (HIGH_WATERMARK: the high watermark) the partition's log start;
        returns the low watermark (the log start across tiers after it)."""
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
        hw = state.high_watermark
        target = hw if offset == HIGH_WATERMARK else offset
        if not 0 <= target <= hw:
            raise TierlogError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"cannot delete records of {topic}-{partition} before {offset}: "
                f"outside [0, high watermark {hw}]",
            )
        before = state.log.log_start_offset
        if view.config.remote_storage_enable:
            start = await self._across_tiers(state, target)
        else:
            start = await asyncio.to_thread(self._hot_only, state, target)
        if start != before:
            log.info(
                "records deleted",
                extra={
                    "topic": topic,
                    "partition": partition,
                    "node": self._broker.config.broker_id,
                    "log_start_offset": start,
                    "previous_log_start_offset": before,
                    "tiered": view.config.remote_storage_enable,
                },
            )
        return start

    def _hot_only(self, state: Partition, target: int) -> int:
        """Blocks on disk: off the event loop."""
        state.unified.advance_log_start(target)
        state.unified.delete_segments_before(target)
        return self._published(state)

    async def _across_tiers(self, state: Partition, target: int) -> int:
        await asyncio.to_thread(self._log_starts.raise_to, state.tp, target)  # first: it lasts
        if target > state.log.log_start_offset:
            await asyncio.to_thread(state.unified.advance_log_start, target)
            self._published(state)
        cold = self._broker.cold_reader
        if cold is None:
            return state.log.log_start_offset
        rng = await cold.cold_range(state.topic_id, state.partition, fresh=True)
        return log_start(state, rng)

    def _published(self, state: Partition) -> int:
        start = state.log.log_start_offset
        state.metrics.log_start_offset.labels(state.topic, str(state.partition)).set(start)
        return start
