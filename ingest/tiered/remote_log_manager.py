"""The broker's share of tiering (Kafka's RemoteLogManager duties that live on the broker).

- **Register sealed segments** (leader only): every sealed segment that is entirely committed
  (end offset ≤ high watermark) is registered once in Postgres (`hot_segments`), from where a
  tiering worker claims it, copies it from a replica and commits it to the topic's Delta table.
  Registration is idempotent; an in-memory set per partition avoids asking again, and a restart
  re-registers harmlessly.
- **Local retention** (every replica, on its own disk): hot segments beyond `local.retention.ms`
  / `local.retention.bytes` are deleted, but only once the cold tier holds them (entirely below
  the manifest's tiered end offset). An untiered segment is never deleted; when tiering lags,
  the bytes kept are exported as a gauge and warned about (rate-limited).
- **Whole-log retention** (every replica): the compaction worker expires cold files
  (`retention.ms` / `retention.bytes`) and so advances the partition's log start (the
  manifest's `log_start_offset`); each replica then raises its own log start to it and
  deletes the hot segments entirely below it, as Kafka's UnifiedLog does after its
  RemoteLogManager moved the log start. Topics without tiering have no cold tier, so their
  replicas apply `retention.ms` / `retention.bytes` to the hot log themselves (below the
  high watermark only), as a Kafka broker does.
- **Tier status** for describe and for a 416 that points at the cold tier.

All Postgres work runs off the event loop (asyncio.to_thread). The duties never raise on a
database outage: they log and try again on the next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol

from cluster.metadata_cache import MetadataCache
from ingest import metrics
from ingest.log.local_log import SegmentInfo
from ingest.replication.partition import PartitionState, Role
from logformat.errors import ErrorCode, TierlogError
from metadata.configs import TopicConfig
from metadata.types import TopicIdPartition

log = logging.getLogger("tierlog.remote_log")

PartitionKey = tuple[str, int]  # (topic id, partition)
WARN_EVERY_S = 60.0


class SegmentRegistryApi(Protocol):
    """What the broker uses of metadata.segment_registry.SegmentRegistry."""

    def register_sealed(
        self, tp: TopicIdPartition, base_offset: int, end_offset: int, size_bytes: int
    ) -> None: ...


class ColdManifestApi(Protocol):
    """What the broker uses of metadata.cold_manifest.ColdManifest."""

    def tiered_end_offset(self, tp: TopicIdPartition) -> int | None: ...

    def cold_range(self, tp: TopicIdPartition) -> tuple[int, int] | None: ...

    def log_start_offset(self, tp: TopicIdPartition) -> int | None: ...


class RetentionPlan(NamedTuple):
    delete_before: int  # delete the segments whose end offset is <= this; -1: none
    segments: int
    bytes: int
    blocked_segments: int  # retention wants them gone, but they are not tiered yet
    blocked_bytes: int
    advance_start: bool = False  # first raise the log start to delete_before (retention)


class TierStatus(NamedTuple):
    cold: tuple[int, int] | None  # [start, end) of the committed cold range
    tiered_end: int | None
    log_start: int | None = None  # the cross-tier log start retention left (None: no cold)


class ManifestView(NamedTuple):
    tiered_end: int | None
    log_start: int | None


def plan_local_retention(
    segments: Sequence[SegmentInfo],
    tiered_end: int | None,
    retention_ms: int,
    retention_bytes: int,
    now_ms: int,
) -> RetentionPlan:
    """Which prefix of the hot log local retention deletes (Kafka's RemoteLogManager rules).

    A sealed segment is due when its newest record is older than `now - retention_ms`, or
    while the partition's hot bytes exceed `retention_bytes` (-1 = unbounded for either).
    Deletion is a prefix: it stops at the first segment that is not due. A due segment that is
    not entirely below `tiered_end` is kept, and so is everything after it (counted blocked).
    The active (last) segment is never deleted.
    """
    total = sum(s.size for s in segments)
    delete_before, n, nbytes, blocked_n, blocked = -1, 0, 0, 0, 0
    for seg in segments[:-1]:
        if not seg.sealed:
            break
        expired = retention_ms >= 0 and seg.max_timestamp < now_ms - retention_ms
        oversize = retention_bytes >= 0 and total > retention_bytes
        if not (expired or oversize):
            break
        if not blocked_n and tiered_end is not None and seg.next_offset <= tiered_end:
            delete_before, n, nbytes = seg.next_offset, n + 1, nbytes + seg.size
        else:
            blocked_n, blocked = blocked_n + 1, blocked + seg.size
        total -= seg.size
    return RetentionPlan(delete_before, n, nbytes, blocked_n, blocked)


class RemoteLogManager:
    def __init__(
        self,
        partitions: Callable[[], Mapping[tuple[str, int], PartitionState]],
        cache: MetadataCache,
        registry: SegmentRegistryApi,
        manifest: ColdManifestApi,
    ) -> None:
        self._partitions, self._cache = partitions, cache
        self._registry, self._manifest = registry, manifest
        self._registered: dict[PartitionKey, set[int]] = {}
        self._labels: set[tuple[str, str]] = set()
        self._lag_labels: set[tuple[str, str]] = set()
        self._warned: dict[PartitionKey, float] = {}

    def _config(self, state: PartitionState) -> TopicConfig | None:
        view = self._cache.topic(state.topic)
        if view is None or view.info.id != state.topic_id:
            return None
        return view.config

    # -- registration (leader) --------------------------------------------------------------

    async def register_sealed(self) -> None:
        """Register the led partitions' committed sealed segments not registered yet."""
        hosted = dict(self._partitions())
        keys = {(s.topic_id, s.partition) for s in hosted.values()}
        for key in [k for k in self._registered if k not in keys]:
            del self._registered[key]
        todo: list[tuple[PartitionState, SegmentInfo]] = []
        for state in hosted.values():
            done = self._registered.setdefault((state.topic_id, state.partition), set())
            cfg = self._config(state)
            if state.role is not Role.LEADER or cfg is None or not cfg.remote_storage_enable:
                continue
            try:
                state.ensure_leader()  # not while our lease is in doubt
            except TierlogError:
                continue
            hw, start = state.high_watermark, state.log.log_start_offset
            done.difference_update([b for b in done if b < start])  # deleted: forget them
            for seg in state.log.segments():
                if (
                    seg.sealed
                    and seg.base_offset not in done
                    and seg.base_offset < seg.next_offset <= hw
                ):
                    todo.append((state, seg))
        if not todo:
            return
        registered = await asyncio.to_thread(self._register, todo)
        for state, seg in registered:
            self._registered.setdefault((state.topic_id, state.partition), set()).add(
                seg.base_offset
            )
            metrics.SEGMENTS_REGISTERED.labels(state.topic).inc()

    def _register(
        self, todo: list[tuple[PartitionState, SegmentInfo]]
    ) -> list[tuple[PartitionState, SegmentInfo]]:
        done = []
        for state, seg in todo:
            try:
                self._registry.register_sealed(
                    TopicIdPartition(state.topic_id, state.partition),
                    seg.base_offset,
                    seg.next_offset,
                    seg.size,
                )
            except Exception:  # the topic was deleted meanwhile (FK), or Postgres is away
                log.exception(
                    "segment registration failed",
                    extra={"topic": state.topic, "partition": state.partition},
                )
                break  # the rest waits for the next tick
            done.append((state, seg))
            log.debug(
                "sealed segment registered topic=%s partition=%d base=%d end=%d bytes=%d",
                state.topic,
                state.partition,
                seg.base_offset,
                seg.next_offset,
                seg.size,
            )
        return done

    # -- local retention (every replica) ----------------------------------------------------

    async def apply_local_retention(self) -> None:
        now_ms = int(time.time() * 1000)
        hosted = list(self._partitions().values())
        self._forget_labels(hosted)
        ask: list[tuple[PartitionState, TopicConfig]] = []
        deletions: list[tuple[PartitionState, RetentionPlan]] = []
        for state in hosted:
            segs = state.log.segments()
            labels = (state.topic, str(state.partition))
            metrics.HOT_BYTES.labels(*labels).set(sum(s.size for s in segs))
            cfg = self._config(state)
            if cfg is None or not cfg.remote_storage_enable:
                metrics.LOCAL_RETENTION_BLOCKED_BYTES.labels(*labels).set(0)
                if state.role is Role.LEADER:
                    self._set_lag(state, 0)
                if cfg is not None and cfg.delete:
                    whole = self._plan_untiered_retention(state, cfg, now_ms)
                    if whole.segments:
                        deletions.append((state, whole))
                continue
            # Every tiered partition asks: the cross-tier log start may have moved.
            ask.append((state, cfg))
        if not ask:
            await asyncio.to_thread(self._delete, deletions, hosted)
            return
        keys = [(s.topic_id, s.partition) for s, _ in ask]
        views = await asyncio.to_thread(self._manifest_views, keys)
        for state, cfg in ask:
            key = (state.topic_id, state.partition)
            if key not in views:
                continue  # the manifest could not be read: decide nothing
            end, start = views[key]
            if start is not None and start > state.log.log_start_offset:
                deletions.append((state, self._advance_to(state, start)))
            if end is None and start is not None:
                end = start  # everything below the log start was tiered (then expired)
            if state.role is Role.LEADER:
                lag = state.high_watermark - (
                    end if end is not None else state.log.log_start_offset
                )
                self._set_lag(state, max(0, lag))
            plan = plan_local_retention(
                state.log.segments(), end, cfg.local_retention_ms, cfg.local_retention_bytes, now_ms
            )
            self._report_blocked(state, plan, end, cfg)
            if plan.segments:
                deletions.append((state, plan))
        await asyncio.to_thread(self._delete, deletions, hosted)

    @staticmethod
    def _plan_untiered_retention(
        state: PartitionState, cfg: TopicConfig, now_ms: int
    ) -> RetentionPlan:
        """Whole-log retention of a topic without a cold tier: retention.ms / retention.bytes
        on the hot log, never at or above the high watermark (Kafka's upper bound)."""
        bound = min(state.high_watermark, state.log.log_end_offset)
        return plan_local_retention(
            state.log.segments(), bound, cfg.retention_ms, cfg.retention_bytes, now_ms
        )

    @staticmethod
    def _advance_to(state: PartitionState, start: int) -> RetentionPlan:
        """Retention moved the log start to `start` in the cold tier: this replica's log
        follows (Kafka's maybeIncrementLogStartOffset + deleteLogStartOffsetBreachedSegments)."""
        return RetentionPlan(start, 0, 0, 0, 0, advance_start=True)

    def _manifest_views(self, keys: list[PartitionKey]) -> dict[PartitionKey, ManifestView]:
        out: dict[PartitionKey, ManifestView] = {}
        for topic_id, partition in keys:
            tp = TopicIdPartition(topic_id, partition)
            try:
                out[(topic_id, partition)] = ManifestView(
                    self._manifest.tiered_end_offset(tp), self._manifest.log_start_offset(tp)
                )
            except Exception:
                log.exception("reading the cold manifest failed")
                break
        return out

    def _delete(
        self, deletions: list[tuple[PartitionState, RetentionPlan]], hosted: list[PartitionState]
    ) -> None:
        for state, plan in deletions:
            try:
                if plan.advance_start:
                    state.log.advance_log_start(min(plan.delete_before, state.log.log_end_offset))
                    metrics.LOG_START_OFFSET.labels(state.topic, str(state.partition)).set(
                        state.log.log_start_offset
                    )
                gone = state.log.delete_segments_before(plan.delete_before)
            except Exception:
                log.exception(
                    "local retention failed",
                    extra={"topic": state.topic, "partition": state.partition},
                )
                continue
            if not gone:
                continue
            size = sum(s.size for s in gone)
            metrics.LOCAL_RETENTION_DELETED_SEGMENTS.labels(state.topic).inc(len(gone))
            metrics.LOCAL_RETENTION_DELETED_BYTES.labels(state.topic).inc(size)
            labels = (state.topic, str(state.partition))
            metrics.LOG_START_OFFSET.labels(*labels).set(state.log.log_start_offset)
            metrics.HOT_BYTES.labels(*labels).set(sum(s.size for s in state.log.segments()))
            log.info(
                "retention deleted segments topic=%s partition=%d segments=%d "
                "bytes=%d up_to=%d local_log_start=%d",
                state.topic,
                state.partition,
                len(gone),
                size,
                plan.delete_before,
                state.log.log_start_offset,
            )
        for state in hosted:
            state.log.reap_deleted()

    def _report_blocked(
        self, state: PartitionState, plan: RetentionPlan, end: int | None, cfg: TopicConfig
    ) -> None:
        key = (state.topic_id, state.partition)
        metrics.LOCAL_RETENTION_BLOCKED_BYTES.labels(state.topic, str(state.partition)).set(
            plan.blocked_bytes
        )
        if not plan.blocked_segments:
            self._warned.pop(key, None)
            return
        now = time.monotonic()
        if now - self._warned.get(key, -WARN_EVERY_S) < WARN_EVERY_S:
            return
        self._warned[key] = now
        log.warning(
            "local retention blocked: segments due for deletion are not tiered yet "
            "topic=%s partition=%d segments=%d bytes=%d tiered_end=%s "
            "local.retention.ms=%d local.retention.bytes=%d",
            state.topic,
            state.partition,
            plan.blocked_segments,
            plan.blocked_bytes,
            end,
            cfg.local_retention_ms,
            cfg.local_retention_bytes,
        )

    def _set_lag(self, state: PartitionState, lag: int) -> None:
        labels = (state.topic, str(state.partition))
        metrics.TIERING_LAG.labels(*labels).set(lag)
        self._lag_labels.add(labels)

    def _forget_labels(self, hosted: list[PartitionState]) -> None:
        """Drop the series of partitions this broker no longer hosts (or no longer leads)."""
        labels = {(s.topic, str(s.partition)) for s in hosted}
        led = {(s.topic, str(s.partition)) for s in hosted if s.role is Role.LEADER}
        for gone in self._labels - labels:
            for gauge in (metrics.HOT_BYTES, metrics.LOCAL_RETENTION_BLOCKED_BYTES):
                with contextlib.suppress(KeyError):
                    gauge.remove(*gone)
        for gone in self._lag_labels - led:
            with contextlib.suppress(KeyError):
                metrics.TIERING_LAG.remove(*gone)
        self._labels = labels
        self._lag_labels &= led

    # -- tier status (describe, errors) -----------------------------------------------------

    async def tier_status(self, topic_id: str, partitions: list[int]) -> dict[int, TierStatus]:
        """Cold range and tiered end of each partition: one trip off the loop per call."""
        return await asyncio.to_thread(self._tier_status, topic_id, partitions)

    def _tier_status(self, topic_id: str, partitions: list[int]) -> dict[int, TierStatus]:
        out = {}
        for p in partitions:
            tp = TopicIdPartition(topic_id, p)
            cold = self._manifest.cold_range(tp)
            end = cold[1] if cold is not None else None
            out[p] = TierStatus(cold, end, self._manifest.log_start_offset(tp))
        return out

    async def out_of_range(self, state: PartitionState, offset: int) -> TierlogError | None:
        """An OFFSET_OUT_OF_RANGE naming the cold tier for an offset below the local log
        start, when the manifest has a cold range; None when it has none."""
        try:
            cold = await asyncio.to_thread(
                self._manifest.cold_range, TopicIdPartition(state.topic_id, state.partition)
            )
        except Exception:
            log.exception("reading the cold manifest failed")
            return None
        if cold is None:
            return None
        lso, leo = state.log.log_start_offset, state.log.log_end_offset
        where = (
            "is in the cold tier"
            if cold[0] <= offset < cold[1]
            else "is below the log start (cold tier"
        )
        detail = f" [{cold[0]}, {cold[1]})" + ("" if cold[0] <= offset < cold[1] else ")")
        return TierlogError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} of {state.topic}-{state.partition} {where}{detail}; this broker's "
            f"hot log holds [{lso}, {leo}] and fetches cannot read the cold tier yet",
            log_start_offset=lso,
            log_end_offset=leo,
            high_watermark=state.high_watermark,
            cold={"start": cold[0], "end": cold[1]},
        )
