"""How far tiering lags, as this broker sees it: the hot bytes of each hosted partition, the
tiering lag of each led one, and the hot bytes local retention must keep because they are
not tiered yet (exported, and warned about at most once a minute per partition). Series of
partitions this broker no longer hosts (or leads) are removed."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence

from ingest import metrics
from ingest.replication.partition import Partition, Role
from ingest.tiered.retention_plan import RetentionPlan
from metadata.configs import TopicConfig
from metadata.types import TopicIdPartition

log = logging.getLogger("tierlog.remote_log")

WARN_EVERY_S = 60.0
Labels = tuple[str, str]  # (topic, partition)


def labels_of(state: Partition) -> Labels:
    return (state.topic, str(state.partition))


class TieringGauges:
    def __init__(self) -> None:
        self._labels: set[Labels] = set()
        self._lag_labels: set[Labels] = set()
        self._warned: dict[TopicIdPartition, float] = {}

    def hosted(self, hosted: Sequence[Partition]) -> None:
        """Start a pass over the hosted partitions: drop the series of the others."""
        labels = {labels_of(s) for s in hosted}
        led = {labels_of(s) for s in hosted if s.role is Role.LEADER}
        for gone in self._labels - labels:
            for gauge in (metrics.HOT_BYTES, metrics.LOCAL_RETENTION_BLOCKED_BYTES):
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
        if state.role is Role.LEADER:
            self.lag(state, 0)

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
