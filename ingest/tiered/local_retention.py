"""Retention on each replica's own disk (Kafka's RLMExpirationTask, as far as the broker goes).

- **Local retention** (tiered topics): hot segments beyond `local.retention.ms` /
  `local.retention.bytes` are deleted, but only once the cold tier holds them (entirely below
  the manifest's tiered end offset). An untiered segment is never deleted; what that keeps
  is reported by TieringGauges.
- **Whole-log retention**: the compaction worker expires cold files (`retention.ms` /
  `retention.bytes`) and so advances the partition's log start (the manifest's
  `log_start_offset`); each replica then raises its own log start to it and deletes the hot
  segments entirely below it, as Kafka's UnifiedLog does after its RemoteLogManager moved the
  log start. Topics without tiering have no cold tier, so their replicas apply `retention.ms`
  / `retention.bytes` to the hot log themselves (below the high watermark only).

Postgres and disk work run off the event loop. A pass never raises on a database outage: it
logs, decides nothing for what it could not read, and tries again on the next tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from cluster.metadata_cache import MetadataCache
from ingest import metrics
from ingest.replication.partition import Partition, Role
from ingest.tiered.manifest_views import ManifestView, ManifestViews
from ingest.tiered.retention_plan import (
    RetentionPlan,
    advance_to,
    follow_log_start,
    plan_local_retention,
    plan_untiered_retention,
)
from ingest.tiered.seams import topic_config
from ingest.tiered.tiering_gauges import TieringGauges, labels_of
from metadata.configs import TopicConfig
from metadata.types import TopicNamePartition

log = logging.getLogger("tierlog.remote_log")

Deletions = list[tuple[Partition, RetentionPlan]]


class LocalRetention:
    def __init__(
        self,
        partitions: Callable[[], Mapping[TopicNamePartition, Partition]],
        cache: MetadataCache,
        views: ManifestViews,
        gauges: TieringGauges,
    ) -> None:
        self._partitions, self._cache = partitions, cache
        self._views, self._gauges = views, gauges

    async def run_once(self) -> None:
        now_ms = int(time.time() * 1000)
        hosted = list(self._partitions().values())
        self._gauges.hosted(hosted)
        deletions: Deletions = []
        tiered: list[tuple[Partition, TopicConfig]] = []
        for state in hosted:
            self._gauges.hot_bytes(state)
            cfg = topic_config(self._cache, state)
            if cfg is not None and cfg.remote_storage_enable:
                tiered.append((state, cfg))  # each asks: the cross-tier log start may move
            else:
                deletions += self._plan_untiered(state, cfg, now_ms)
        if tiered:
            views = await asyncio.to_thread(self._views.read, [s.tp for s, _ in tiered])
            for state, cfg in tiered:
                view = views.get(state.tp)
                if view is not None:  # None: the manifest could not be read, decide nothing
                    deletions += self._plan_tiered(state, cfg, view, now_ms)
        self._gauges.pass_done(hosted)
        await asyncio.to_thread(self._delete, deletions, hosted)

    def _plan_untiered(self, state: Partition, cfg: TopicConfig | None, now_ms: int) -> Deletions:
        self._gauges.not_tiered(state)
        out: Deletions = []
        segments, start = state.log.segments(), state.log.log_start_offset
        if len(segments) > 1 and segments[0].next_offset <= start:
            # Kafka's deleteLogStartOffsetBreachedSegments: a follower raised its log start
            # to the leader's (DeleteRecords); the segments wholly below it go.
            out.append((state, advance_to(start)))
        if cfg is None or not cfg.delete:
            return out
        plan = plan_untiered_retention(state, cfg, now_ms)
        return [*out, (state, plan)] if plan.segments else out

    def _plan_tiered(
        self, state: Partition, cfg: TopicConfig, view: ManifestView, now_ms: int
    ) -> Deletions:
        out: Deletions = []
        end, start, deleted = view
        if end is None and start is not None:
            end = start  # everything below the log start was tiered (then expired)
        follow = follow_log_start(
            state.log.segments(), state.log.log_start_offset, end, max(start or 0, deleted or 0)
        )
        if follow is not None:
            out.append((state, follow))
        self._gauges.untiered(state, end, now_ms)
        if state.role is Role.LEADER:
            tiered_to = end if end is not None else state.log.log_start_offset
            self._gauges.lag(state, max(0, state.high_watermark - tiered_to))
        plan = plan_local_retention(
            state.log.segments(), end, cfg.local_retention_ms, cfg.local_retention_bytes, now_ms
        )
        self._gauges.blocked(state, plan, end, cfg)
        if plan.segments:
            out.append((state, plan))
        return out

    def _delete(self, deletions: Deletions, hosted: list[Partition]) -> None:
        for state, plan in deletions:
            try:
                if plan.advance_start:
                    start = plan.log_start if plan.log_start >= 0 else plan.delete_before
                    state.unified.advance_log_start(min(start, state.log.log_end_offset))
                    state.metrics.log_start_offset.labels(*labels_of(state)).set(
                        state.log.log_start_offset
                    )
                gone = state.unified.delete_segments_before(plan.delete_before)
            except Exception:
                log.exception(
                    "local retention failed",
                    extra={"topic": state.topic, "partition": state.partition},
                )
                continue
            if gone:
                self._deleted(state, plan, sum(s.size for s in gone), len(gone))
        for state in hosted:
            state.log.reap_deleted()

    def _deleted(self, state: Partition, plan: RetentionPlan, size: int, count: int) -> None:
        metrics.LOCAL_RETENTION_DELETED_SEGMENTS.labels(state.topic).inc(count)
        metrics.LOCAL_RETENTION_DELETED_BYTES.labels(state.topic).inc(size)
        state.metrics.log_start_offset.labels(*labels_of(state)).set(state.log.log_start_offset)
        self._gauges.hot_bytes(state)
        log.info(
            "local retention deleted segments",
            extra={
                "topic": state.topic,
                "partition": state.partition,
                "segments": count,
                "bytes": size,
                "up_to": plan.delete_before,
                "local_log_start": state.log.log_start_offset,
            },
        )
