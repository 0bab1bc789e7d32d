"""The untiered-bytes bound: what counts as untiered, and whose produce waits."""

from __future__ import annotations

from ingest.log.local_log import SegmentInfo
from ingest.tiered.untiered_bound import Untiered, UntieredBound
from metadata.types import TopicIdPartition

NOW = 1_000_000
A, B = TopicIdPartition("t", 0), TopicIdPartition("t", 1)


def _segments(*ends: int, size: int = 100) -> list[SegmentInfo]:
    """Sealed segments [0, e1), [e1, e2), ..., created 1 s apart, and an active last one."""
    out, base = [], 0
    for i, end in enumerate(ends):
        sealed = i < len(ends) - 1
        out.append(SegmentInfo(base, end, size, sealed, f"/s{base}", 0, NOW - 10_000 + 1000 * i))
        base = end
    return out


def test_sealed_segments_above_the_tiered_end_are_untiered() -> None:
    waiting = Untiered(_segments(10, 20, 30, 40), 10)
    assert (waiting.segments, waiting.bytes) == (2, 200)  # [10, 20) and [20, 30); 40 is active
    assert waiting.age_s(NOW) == 9.0  # the oldest of them, [10, 20), was created at NOW - 9 s


def test_nothing_tiered_yet_counts_every_sealed_segment() -> None:
    assert Untiered(_segments(10, 20, 30), None).bytes == 200


def test_all_tiered_counts_nothing_and_has_no_age() -> None:
    waiting = Untiered(_segments(10, 20), 10)
    assert (waiting.segments, waiting.bytes, waiting.age_s(NOW)) == (0, 0, 0.0)


def test_only_partitions_holding_untiered_bytes_wait_and_only_over_the_bound() -> None:
    bound = UntieredBound(max_bytes=250, refresh_ms=1000)
    bound.update(A, 200)
    bound.update(B, 0)
    bound.retain({A, B})
    assert bound.waiting(A) == 0  # 200 <= 250
    bound.update(A, 300)
    bound.retain({A, B})
    assert (bound.waiting(A), bound.waiting(B)) == (300, 0)


def test_replicas_no_longer_hosted_leave_the_total() -> None:
    bound = UntieredBound(max_bytes=250, refresh_ms=1000)
    bound.update(A, 300)
    bound.update(B, 300)
    bound.retain({B})
    assert bound.total == 300 and bound.waiting(A) == 0


def test_zero_turns_the_bound_off() -> None:
    bound = UntieredBound(max_bytes=0, refresh_ms=1000)
    bound.update(A, 10**12)
    bound.retain({A})
    assert bound.waiting(A) == 0
