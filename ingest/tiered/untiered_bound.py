"""Backpressure from tiering: a bound on the bytes a broker holds that the cold tier lacks.

Local retention never deletes an untiered segment, so when produce outruns tiering the hot
tier grows until the disk is full. Instead, once the untiered bytes of this broker's hosted
replicas (sealed segments not yet below the manifest's tiered end) exceed
`max_untiered_bytes`, client produce to the partitions it leads that hold untiered bytes gets
503 THROTTLING_QUOTA_EXCEEDED with Retry-After; partitions whose tiering keeps up, topics
without a cold tier and replication (followers fetch, they never produce) go on.

Only sealed segments count: the active segment cannot be tiered yet and is bounded by
`segment.bytes` anyway, so counting it would throttle a partition for its own roll-over
rather than for a tiering lag. The figures are refreshed by each local retention pass
(`tiering_duty_ms`, 1 s), which already reads every tiered end; the bound can therefore be
overshot by about one pass's worth of ingest, and lifts within one pass of tiering catching
up (Retry-After says so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cluster.http.limits import LimitError
from cluster.metrics import REJECTED_REQUESTS
from ingest import metrics
from ingest.log.local_log import SegmentInfo
from ingest.replication.partition import Partition
from logformat.errors import ErrorCode
from metadata.types import TopicIdPartition


class Untiered:
    """A replica's sealed segments the cold tier does not hold yet."""

    __slots__ = ("bytes", "oldest_created_ms", "segments")

    def __init__(self, segments: Sequence[SegmentInfo], tiered_end: int | None) -> None:
        lagging = [
            s for s in segments if s.sealed and (tiered_end is None or s.next_offset > tiered_end)
        ]
        self.segments = len(lagging)
        self.bytes = sum(s.size for s in lagging)
        self.oldest_created_ms = min((s.created_ms for s in lagging), default=None)

    def age_s(self, now_ms: int) -> float:
        """How long the oldest untiered segment has waited (0 when none waits)."""
        if self.oldest_created_ms is None:
            return 0.0
        return max(0.0, (now_ms - self.oldest_created_ms) / 1000)


class UntieredBound:
    def __init__(self, max_bytes: int, refresh_ms: int) -> None:
        self.max_bytes = max_bytes  # 0: no bound
        self._retry_after = str(max(1, math.ceil(refresh_ms / 1000)))
        self._untiered: dict[TopicIdPartition, int] = {}
        self.total = 0
        metrics.UNTIERED_BYTES_LIMIT.set(max_bytes)
        metrics.UNTIERED_BYTES.set_function(lambda: self.total)

    def update(self, tp: TopicIdPartition, untiered_bytes: int) -> None:
        self._untiered[tp] = untiered_bytes

    def retain(self, hosted: set[TopicIdPartition]) -> None:
        """End of a pass: forget replicas no longer hosted, and total what is left."""
        for gone in self._untiered.keys() - hosted:
            del self._untiered[gone]
        self.total = sum(self._untiered.values())

    def waiting(self, tp: TopicIdPartition) -> int:
        """The partition's untiered bytes if its produce must wait, else 0: the broker is
        over its bound and this partition is part of why (one whose tiering keeps up, or a
        topic without a cold tier, is not)."""
        if self.max_bytes <= 0 or self.total <= self.max_bytes:
            return 0
        return self._untiered.get(tp, 0)

    def check(self, state: Partition) -> None:
        """Raise the retriable 503 if this partition must wait for tiering."""
        mine = self.waiting(state.tp)
        if mine <= 0:
            return
        REJECTED_REQUESTS.labels("untiered_bytes").inc()
        raise LimitError(
            ErrorCode.THROTTLING_QUOTA_EXCEEDED,
            f"produce to {state.topic}-{state.partition} is paused: this broker holds "
            f"{self.total} bytes not yet copied to the cold tier ({mine} of them in this "
            f"partition), over its limit of {self.max_bytes} (--max-untiered-bytes); "
            f"tiering is behind, retry after {self._retry_after} s",
            503,
            {"Retry-After": self._retry_after},
            untiered_bytes=self.total,
            max_untiered_bytes=self.max_bytes,
        )
