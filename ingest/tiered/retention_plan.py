"""Which prefix of a replica's hot log retention deletes: pure decisions, no I/O.

Kafka's rules: local retention (`local.retention.ms` / `local.retention.bytes`) deletes only
what the cold tier holds; a topic without a cold tier applies whole-log retention
(`retention.ms` / `retention.bytes`) to its hot log, below the high watermark; and a log start
that retention moved in the cold tier is followed by every replica.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ingest.log.local_log import SegmentInfo
from ingest.replication.partition import Partition
from metadata.configs import TopicConfig


class RetentionPlan(NamedTuple):
    delete_before: int  # delete the segments whose end offset is <= this; -1: none
    segments: int
    bytes: int
    blocked_segments: int  # retention wants them gone, but they are not tiered yet
    blocked_bytes: int
    advance_start: bool = False  # first raise the log start (retention, DeleteRecords)
    log_start: int = -1  # ... to this (-1: to delete_before)


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


def follow_log_start(
    segments: Sequence[SegmentInfo], log_start: int, tiered_end: int | None, cross_tier_start: int
) -> RetentionPlan | None:
    """The replica follows the partition's cross-tier log start (what cold retention left, or
    a DeleteRecords start): its log start rises to it and the segments wholly below it go,
    those the cold tier holds only (records below a DeleteRecords start may not be tiered yet;
    the tiering worker copies whole segments, in order). Also when this replica's log start got
    there first: a follower takes the leader's log start from its fetch responses (the files
    stay), and its segments below it must go all the same (Kafka's
    deleteLogStartOffsetBreachedSegments). None: nothing to do."""
    start = max(cross_tier_start, log_start)
    deletable_below = min(start, tiered_end or 0)
    below = len(segments) > 1 and segments[0].next_offset <= deletable_below
    if start > log_start or below:
        return advance_to(start, deletable_below=deletable_below)
    return None


def plan_untiered_retention(state: Partition, cfg: TopicConfig, now_ms: int) -> RetentionPlan:
    """Whole-log retention of a topic without a cold tier: retention.ms / retention.bytes
    on the hot log, never at or above the high watermark (Kafka's upper bound)."""
    bound = min(state.high_watermark, state.log.log_end_offset)
    return plan_local_retention(
        state.log.segments(), bound, cfg.retention_ms, cfg.retention_bytes, now_ms
    )


def advance_to(start: int, deletable_below: int | None = None) -> RetentionPlan:
    """Retention (or DeleteRecords) moved the log start to `start`: this replica's log
    follows (Kafka's maybeIncrementLogStartOffset + deleteLogStartOffsetBreachedSegments),
    deleting the segments wholly below `deletable_below` (default: `start`)."""
    below = start if deletable_below is None else deletable_below
    return RetentionPlan(below, 0, 0, 0, 0, advance_start=True, log_start=start)
