"""Kafka's CooperativeStickyAssignor: the sticky assignment, handed over without a stop.

The target is the StickyAssignor's. What makes it cooperative is the hand-over: a member
keeps every partition that stays with it and gives up only those that move; a moving
partition reaches its new owner only once the old owner no longer holds it. Kafka's classic
protocol does that in two rebalances (``assign_first_round`` is its first: the target minus
the partitions still held by someone else); tierlog's coordinator does it per partition
through heartbeats (groups/reconcile.py), so it uses the full target (``assign``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from groups.assignors import sticky
from groups.assignors.base import Assignment, MemberSubscription, transferring

NAME = "cooperative-sticky"


def assign(members: Sequence[MemberSubscription], partitions: Mapping[str, int]) -> Assignment:
    return sticky.assign(members, partitions)


def assign_first_round(
    members: Sequence[MemberSubscription], partitions: Mapping[str, int]
) -> Assignment:
    """What Kafka's CooperativeStickyAssignor.assign returns: partitions changing owner are
    left out until their current owner has revoked them."""
    target = sticky.assign(members, partitions)
    moving = transferring(members, target)
    return {m: [tp for tp in tps if tp not in moving] for m, tps in target.items()}
