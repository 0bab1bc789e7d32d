"""What every assignor takes and returns, and helpers they share.

An assignor is a pure function of the members (subscriptions, and for the sticky ones the
partitions each holds now) and of the partition count of each topic; it returns the target
assignment: member id → partitions. It never sees time, the network or the database, so the
coordinator can run it inside the group's transaction and tests can run it on plain data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from metadata.types import TopicNamePartition


class MemberSubscription(NamedTuple):
    member_id: str
    topics: frozenset[str]
    # What the member holds now (its current target); only the sticky assignors look at it.
    owned: frozenset[TopicNamePartition] = frozenset()


# member id → partitions, each list sorted; every member of the input has an entry.
Assignment = dict[str, list[TopicNamePartition]]
AssignFn = Callable[[Sequence[MemberSubscription], Mapping[str, int]], Assignment]


def topic_partitions(topic: str, count: int) -> list[TopicNamePartition]:
    return [TopicNamePartition(topic, p) for p in range(count)]


def subscribed_partitions(
    members: Iterable[MemberSubscription], partitions: Mapping[str, int]
) -> list[TopicNamePartition]:
    """Every existing partition of a topic some member subscribes to, sorted."""
    topics = sorted({t for m in members for t in m.topics if partitions.get(t, 0) > 0})
    return [tp for t in topics for tp in topic_partitions(t, partitions[t])]


def sorted_assignment(assignment: Mapping[str, Iterable[TopicNamePartition]]) -> Assignment:
    return {m: sorted(tps) for m, tps in sorted(assignment.items())}


def transferring(
    members: Sequence[MemberSubscription], assignment: Mapping[str, Iterable[TopicNamePartition]]
) -> dict[TopicNamePartition, str]:
    """Partitions that change owner: assigned to a member that does not hold them, while
    another member holds them now and must give them up first (partition → new owner)."""
    added: dict[TopicNamePartition, str] = {}
    revoked: set[TopicNamePartition] = set()
    by_id = {m.member_id: m for m in members}
    for member_id, tps in assignment.items():
        new = set(tps)
        owned = by_id[member_id].owned if member_id in by_id else frozenset()
        added.update({tp: member_id for tp in new - owned})
        revoked |= owned - new
    return {tp: m for tp, m in added.items() if tp in revoked}
