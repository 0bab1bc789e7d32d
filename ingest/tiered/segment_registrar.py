"""Registers sealed segments for tiering (the leader's part of Kafka's RLMCopyTask).

Every sealed segment of a led partition that is entirely committed (end offset ≤ high
watermark) is registered once in Postgres (`hot_segments`), from where a tiering worker
claims it, copies it from a replica and commits it to the topic's Delta table. Registration
is idempotent; an in-memory set per partition avoids asking again, and a restart
re-registers harmlessly. Postgres work runs off the event loop; an outage is logged and the
rest waits for the next tick.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from cluster.metadata_cache import MetadataCache
from failures.logged import log_failure
from ingest import metrics
from ingest.log.local_log import SegmentInfo
from ingest.replication.partition import Partition, Role
from ingest.tiered.seams import SegmentRegistryApi, topic_config
from logformat.errors import TierlogError
from metadata.db_errors import POSTGRES_DOWN, ConstraintViolation
from metadata.types import TopicIdPartition, TopicNamePartition

log = logging.getLogger("tierlog.remote_log")

Todo = list[tuple[Partition, SegmentInfo]]
# Postgres away, or the topic deleted meanwhile (its partition's foreign key).
_NOT_NOW: tuple[type[Exception], ...] = (*POSTGRES_DOWN, ConstraintViolation)


class SealedSegmentRegistrar:
    def __init__(
        self,
        partitions: Callable[[], Mapping[TopicNamePartition, Partition]],
        cache: MetadataCache,
        registry: SegmentRegistryApi,
    ) -> None:
        self._partitions, self._cache, self._registry = partitions, cache, registry
        self._registered: dict[TopicIdPartition, set[int]] = {}

    async def run_once(self) -> None:
        """Register the led partitions' committed sealed segments not registered yet."""
        hosted = list(self._partitions().values())
        keys = {s.tp for s in hosted}
        for key in [k for k in self._registered if k not in keys]:
            del self._registered[key]
        todo = [item for state in hosted for item in self._due(state)]
        if not todo:
            return
        registered = await asyncio.to_thread(self._register, todo)
        for state, seg in registered:
            self._registered.setdefault(state.tp, set()).add(seg.base_offset)
            metrics.SEGMENTS_REGISTERED.labels(state.topic).inc()

    def _due(self, state: Partition) -> Todo:
        """The partition's segments to register now: none unless it leads a tiered topic."""
        done = self._registered.setdefault(state.tp, set())
        cfg = topic_config(self._cache, state)
        if state.role is not Role.LEADER or cfg is None or not cfg.remote_storage_enable:
            return []
        try:
            state.ensure_leader()  # not while our lease is in doubt
        except TierlogError:
            return []
        hw, start = state.high_watermark, state.log.log_start_offset
        done.difference_update([b for b in done if b < start])  # deleted: forget them
        return [
            (state, seg)
            for seg in state.log.segments()
            if seg.sealed
            and seg.base_offset not in done
            and seg.base_offset < seg.next_offset <= hw
        ]

    def _register(self, todo: Todo) -> Todo:
        done = []
        for state, seg in todo:
            try:
                self._registry.register_sealed(state.tp, seg.base_offset, seg.next_offset, seg.size)
            # The topic was deleted meanwhile (FK), or Postgres is away: this segment waits for
            # the next turn. Anything else is a bug, for the duty's policy (cluster/duty.py).
            except _NOT_NOW as exc:
                where = {"topic": state.topic, "partition": state.partition}
                log_failure(log, "segment registration failed", exc, where)
                break  # the rest waits for the next tick
            done.append((state, seg))
            log.debug(
                "sealed segment registered",
                extra={
                    "topic": state.topic,
                    "partition": state.partition,
                    "base_offset": seg.base_offset,
                    "end_offset": seg.next_offset,
                    "size_bytes": seg.size,
                },
            )
        return done
