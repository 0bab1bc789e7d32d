"""How far tiering lags, as this broker sees it: the hot bytes of each hosted partition, the
tiering lag of each led one (records), the sealed bytes, segments and age each hosted
replica holds that the cold tier lacks (Kafka's RemoteCopyLag*, and what the untiered bound
of ingest/tiered/untiered_bound.py counts), and the hot bytes local retention must keep
because they are not tiered yet (exported, and warned about at most once a minute per
partition). Series of partitions this broker no longer hosts (or leads) are removed."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence

from ingest import metrics
from ingest.replication.partition import Partition, Role
from ingest.tiered.retention_plan import RetentionPlan
from ingest.tiered.untiered_bound import Untiered, UntieredBound
from metadata.configs import TopicConfig
from metadata.types import TopicIdPartition

log = logging.getLogger("tierlog.remote_log")

WARN_EVERY_S = 60.0
Labels = tuple[str, str]  # (topic, partition)
PER_REPLICA = (
    metrics.HOT_BYTES,
    metrics.LOCAL_RETENTION_BLOCKED_BYTES,
    metrics.REMOTE_COPY_LAG_BYTES,
    metrics.REMOTE_COPY_LAG_SEGMENTS,
    metrics.REMOTE_COPY_LAG_SECONDS,
)


def labels_of(state: Partition) -> Labels:
    return (state.topic, str(state.partition))


class TieringGauges:
    def __init__(self, bound: UntieredBound | None = None) -> None:
        self.bound = bound if bound is not None else UntieredBound(0, 1000)
        self._labels: set[Labels] = set()
        self._lag_labels: set[Labels] = set()
        self._warned: dict[TopicIdPartition, float] = {}

    def hosted(self, hosted: Sequence[Partition]) -> None:
        """Start a pass over the hosted partitions: drop the series of the others."""
        labels = {labels_of(s) for s in hosted}
        led = {labels_of(s) for s in hosted if s.role is Role.LEADER}
        for gone in self._labels - labels:
            for gauge in PER_REPLICA:
                with contextlib.suppress(KeyError):
                    gauge.remove(*gone)
        for gone in self._lag_labels - led:
            with contextlib.suppress(KeyError):
                metrics.TIERING_LAG.remove(*gone)
        self._labels = labels
        self._lag_labels &= led

    def hot_bytes(self, state: Partition) -> None:
        metrics.HOT_BYTES.labels(*labels_of(state)).set(sum(s.size for s in state.log.segments()))

    def not_tiered(self, state: Partition) -> None:
        """A partition of a topic without a cold tier: nothing is blocked, nothing lags."""
        metrics.LOCAL_RETENTION_BLOCKED_BYTES.labels(*labels_of(state)).set(0)
        self._copy_lag(state, 0, 0, 0.0)
        if state.role is Role.LEADER:
            self.lag(state, 0)

    def untiered(self, state: Partition, tiered_end: int | None, now_ms: int) -> None:
        """The sealed segments of a tiered replica above the cold tier's end."""
        waiting = Untiered(state.log.segments(), tiered_end)
        self._copy_lag(state, waiting.bytes, waiting.segments, waiting.age_s(now_ms))

    def _copy_lag(self, state: Partition, nbytes: int, segments: int, age_s: float) -> None:
        labels = labels_of(state)
        metrics.REMOTE_COPY_LAG_BYTES.labels(*labels).set(nbytes)
        metrics.REMOTE_COPY_LAG_SEGMENTS.labels(*labels).set(segments)
        metrics.REMOTE_COPY_LAG_SECONDS.labels(*labels).set(age_s)
        self.bound.update(state.tp, nbytes)

    def pass_done(self, hosted: Sequence[Partition]) -> None:
        """End of a pass: the broker's untiered total from what each replica reported."""
        self.bound.retain({s.tp for s in hosted})

    def lag(self, state: Partition, lag: int) -> None:
        labels = labels_of(state)
        metrics.TIERING_LAG.labels(*labels).set(lag)
        self._lag_labels.add(labels)

    def blocked(
        self, state: Partition, plan: RetentionPlan, end: int | None, cfg: TopicConfig
    ) -> None:
        key = state.tp
        metrics.LOCAL_RETENTION_BLOCKED_BYTES.labels(*labels_of(state)).set(plan.blocked_bytes)
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
