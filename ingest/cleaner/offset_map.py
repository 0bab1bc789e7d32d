"""The log cleaner's pure parts: what to clean (plan) and which records survive (offset map).

Kafka's LogCleaner model: a partition's log is [clean section | dirty section | uncleanable].
The clean section was compacted by earlier passes (the cleaner checkpoint marks its end); the
dirty section holds everything appended since. A pass builds key → latest offset over the
dirty section, then recopies both sections keeping a record only if no later record of its
key exists. Records in the clean section whose key is not in the map were already the latest
of their key, so they stay. Nothing here touches files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import pyarrow as pa

from ingest.log.local_log import SegmentInfo

MAX_GROUP_SPAN = (1 << 31) - 1  # offset deltas are int32


class CleanBounds(NamedTuple):
    """Limits on what a pass may touch, each an exclusive end offset (None: no limit)."""

    high_watermark: int
    tiered_end: int | None  # remote-storage topics: only segments the cold tier already holds
    now_ms: int
    min_compaction_lag_ms: int


class CleanPlan(NamedTuple):
    segments: list[SegmentInfo]  # the sealed segments [start, end) recopied this pass
    dirty_start: int  # first offset not cleaned by an earlier pass
    end: int  # the cleanable end: offsets at or above it are not touched
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable(segments: Sequence[SegmentInfo], bounds: CleanBounds) -> list[SegmentInfo]:
    """The prefix of sealed segments a pass may rewrite (Kafka's cleanable range): never the
    active segment, nothing at or above the high watermark, nothing the cold tier does not
    hold yet (so tiering always copies untouched bytes), and nothing whose newest record is
    younger than min.compaction.lag.ms (which bounds everything after it too)."""
    out: list[SegmentInfo] = []
    horizon = bounds.now_ms - bounds.min_compaction_lag_ms
    for seg in segments[:-1]:
        if (
            not seg.sealed
            or seg.next_offset > bounds.high_watermark
            or (bounds.tiered_end is not None and seg.next_offset > bounds.tiered_end)
            or seg.max_timestamp > horizon
        ):
            break
        out.append(seg)
    return out


def plan(
    segments: Sequence[SegmentInfo], checkpoint: int, bounds: CleanBounds, tiered: bool
) -> CleanPlan | None:
    """The pass to run, or None when nothing is cleanable or nothing is dirty.

    `tiered`: the topic has remote storage, so `bounds.tiered_end` None means nothing is
    tiered yet (clean nothing) rather than "no limit".
    """
    if tiered and bounds.tiered_end is None:
        return None
    segs = cleanable(segments, bounds)
    if not segs:
        return None
    end = segs[-1].next_offset
    start = segs[0].base_offset
    dirty_start = min(max(checkpoint, start), end)
    if dirty_start >= end:
        return None
    clean = sum(s.size for s in segs if s.next_offset <= dirty_start)
    dirty = sum(s.size for s in segs if s.next_offset > dirty_start)
    return CleanPlan(segs, dirty_start, end, clean, dirty)


class OffsetMap:
    """key → latest offset over the dirty section. `capacity` bounds memory: a pass whose
    dirty section holds more distinct keys stops its dirty end early (at a frame boundary)
    and the next pass goes on from there, as Kafka's bounded dedupe buffer does."""

    def __init__(self, capacity: int = 1_000_000) -> None:
        self.capacity = capacity
        self._latest: dict[bytes | None, int] = {}

    def __len__(self) -> int:
        return len(self._latest)

    @property
    def full(self) -> bool:
        return len(self._latest) >= self.capacity

    def add(self, batch: pa.RecordBatch, base_offset: int) -> None:
        """Record a frame's records (RECORD_SCHEMA batch); later offsets override earlier."""
        keys = batch.column(2).to_pylist()
        offsets = [base_offset + d for d in batch.column(0).to_pylist()]
        self._latest.update(zip(keys, offsets, strict=True))
        self._latest.pop(None, None)  # null keys are never compacted

    def latest(self, key: bytes) -> int | None:
        return self._latest.get(key)

    def keep_mask(
        self, batch: pa.RecordBatch, base_offset: int, tombstone_horizon_ms: int
    ) -> list[bool]:
        """Which rows of a frame survive: a null key always (never compacted, as the cold
        tier); else only the latest record of its key, and a tombstone only while its own
        timestamp is within delete.retention.ms (the cold tier's rule)."""
        get = self._latest.get
        keys = batch.column(2).to_pylist()
        deltas = batch.column(0).to_pylist()
        nulls = batch.column(3).is_null().to_pylist()
        stamps = batch.column(1).cast(pa.int64()).to_pylist()
        out: list[bool] = []
        for key, delta, tomb, ts in zip(keys, deltas, nulls, stamps, strict=True):
            if key is None:
                out.append(True)
                continue
            latest = get(key)
            if latest is not None and latest > base_offset + delta:
                out.append(False)
            else:
                out.append(not (tomb and ts < tombstone_horizon_ms))
        return out
