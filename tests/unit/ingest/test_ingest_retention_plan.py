"""The retention planner: which prefix of a hot log local retention deletes."""

from __future__ import annotations

from ingest.log.local_log import SegmentInfo
from ingest.tiered.retention_plan import advance_to, follow_log_start, plan_local_retention

NOW = 1_000_000


def _segments(*ends: int, size: int = 100, ts: int = 0) -> list[SegmentInfo]:
    """Sealed segments [0, e1), [e1, e2), ... and an active last one."""
    out, base = [], 0
    for i, end in enumerate(ends):
        out.append(SegmentInfo(base, end, size, i < len(ends) - 1, f"/s{base}", ts, ts))
        base = end
    return out


def test_expired_and_tiered_segments_are_deleted_as_a_prefix() -> None:
    plan = plan_local_retention(_segments(10, 20, 30), 20, 1000, -1, NOW)
    assert (plan.delete_before, plan.segments, plan.bytes) == (20, 2, 200)
    assert plan.blocked_segments == 0


def test_untiered_segments_block_deletion_and_are_counted() -> None:
    plan = plan_local_retention(_segments(10, 20, 30), 10, 1000, -1, NOW)
    assert (plan.delete_before, plan.segments) == (10, 1)
    assert (plan.blocked_segments, plan.blocked_bytes) == (1, 100)


def test_nothing_is_due_while_within_time_and_bytes() -> None:
    plan = plan_local_retention(_segments(10, 20, ts=NOW), 20, 1000, 10_000, NOW)
    assert plan.delete_before == -1 and plan.segments == 0 and plan.blocked_segments == 0


def test_size_retention_deletes_until_under_the_limit() -> None:
    plan = plan_local_retention(_segments(10, 20, 30, ts=NOW), 30, -1, 150, NOW)
    assert (plan.delete_before, plan.segments) == (20, 2)


def test_the_active_segment_is_never_deleted() -> None:
    plan = plan_local_retention(_segments(10), 10, 0, 0, NOW)
    assert plan.segments == 0


def test_advancing_the_log_start_is_its_own_plan() -> None:
    plan = advance_to(42)
    assert plan.advance_start and plan.delete_before == 42 and plan.segments == 0


def test_a_replica_follows_the_cross_tier_log_start() -> None:
    plan = follow_log_start(_segments(10, 20, 30), 0, 30, 20)
    assert plan is not None and plan.advance_start
    assert (plan.log_start, plan.delete_before) == (20, 20)


def test_segments_below_a_log_start_already_raised_still_go() -> None:
    """A follower's log start rose to the leader's (fetch responses carry it; the files stay)
    before its own pass read the cold manifest: the segments wholly below it go all the same.
    (Before, nothing moved the start, so nothing was deleted: they stayed for a week.)"""
    plan = follow_log_start(_segments(10, 20, 30), 20, 30, 20)
    assert plan is not None and (plan.log_start, plan.delete_before) == (20, 20)


def test_only_what_the_cold_tier_holds_goes() -> None:
    """A DeleteRecords start above the tiered end: the start moves, the untiered stay."""
    plan = follow_log_start(_segments(10, 20, 30), 0, 10, 25)
    assert plan is not None and (plan.log_start, plan.delete_before) == (25, 10)
    assert follow_log_start(_segments(10, 20, 30), 25, 5, 25) is None  # nothing deletable
    assert follow_log_start(_segments(10, 20, 30), 25, None, 25) is None  # nothing tiered


def test_nothing_to_follow() -> None:
    assert follow_log_start(_segments(10, 20, 30), 0, 30, 0) is None
    assert follow_log_start(_segments(30), 30, 30, 30) is None  # only the active segment
