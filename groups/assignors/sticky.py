"""Kafka's StickyAssignor: as balanced as possible first, then as few moves as possible.

Balanced means Kafka's definition: member counts differ by at most one, or no member with
two or more fewer partitions than another could take one of that member's partitions (it
does not subscribe to their topics). Within that, every member keeps what it holds now
(``MemberSubscription.owned``) as far as balance allows.

1. Keep: each member keeps the partitions it holds that still exist and that it still
   subscribes to (a partition two members claim stays with the first by id). With identical
   subscriptions each keeps at most its quota (total // members, one more for the first
   total % members members, those holding the most getting those slots): the fewest moves.
2. Fill: free partitions, those with the fewest possible consumers first, then in (topic,
   partition) order, each go to the least loaded member that can take it (ties: lowest id).
   From scratch with equal subscriptions this is round robin.
3. Balance (different subscriptions): while a member could take a partition from one holding
   two or more partitions more than it, move one — preferring partitions the giver did not
   hold before this assignment, so a move is never wasted on a partition that stayed put.

Kafka's javadoc examples come out exactly (tests/unit/groups).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from groups.assignors.base import (
    Assignment,
    MemberSubscription,
    sorted_assignment,
    subscribed_partitions,
)
from metadata.types import TopicNamePartition

NAME = "sticky"


class _State:
    """Who holds what while the assignment is built."""

    def __init__(self, members: Sequence[MemberSubscription], partitions: Mapping[str, int]):
        self.ids = sorted(m.member_id for m in members)
        self.eligible = {
            m.member_id: frozenset(t for t in m.topics if partitions.get(t, 0) > 0) for m in members
        }
        self.held: dict[str, set[TopicNamePartition]] = {m: set() for m in self.ids}
        self.owner: dict[TopicNamePartition, str] = {}

    def give(self, tp: TopicNamePartition, member_id: str) -> None:
        previous = self.owner.get(tp)
        if previous is not None:
            self.held[previous].discard(tp)
        self.owner[tp] = member_id
        self.held[member_id].add(tp)

    def release(self, tp: TopicNamePartition) -> None:
        self.held[self.owner.pop(tp)].discard(tp)

    def count(self, member_id: str) -> int:
        return len(self.held[member_id])


def _keep_owned(
    state: _State, members: Sequence[MemberSubscription], partitions: Mapping[str, int]
) -> None:
    for m in sorted(members, key=lambda m: m.member_id):
        for tp in sorted(m.owned):
            valid = tp.topic in state.eligible[m.member_id] and tp.partition < partitions[tp.topic]
            if valid and tp not in state.owner:
                state.give(tp, m.member_id)


def _trim_to_quotas(state: _State, total: int) -> None:
    """Equal subscriptions: nobody keeps more than its share, and the ceil shares go to the
    members holding the most, which keeps the most partitions where they are."""
    quota, extra = divmod(total, len(state.ids))
    by_holdings = sorted(state.ids, key=lambda m: (-state.count(m), m))
    for rank, member_id in enumerate(by_holdings):
        allowed = quota + 1 if rank < extra else quota
        for tp in sorted(state.held[member_id])[allowed:]:
            state.release(tp)


def _fill(state: _State, all_tps: list[TopicNamePartition]) -> None:
    consumers = {
        t: [m for m in state.ids if t in state.eligible[m]] for t in {tp.topic for tp in all_tps}
    }
    free = sorted(
        (tp for tp in all_tps if tp not in state.owner),
        key=lambda tp: (len(consumers[tp.topic]), tp),
    )
    for tp in free:
        state.give(tp, min(consumers[tp.topic], key=lambda m: (state.count(m), m)))


def _balance(state: _State, before: Mapping[str, frozenset[TopicNamePartition]]) -> None:
    # Every move takes from a member holding >= 2 more than the taker, so the sum of squared
    # counts falls strictly: the loop ends.
    while True:
        takers = sorted(state.ids, key=lambda m: (state.count(m), m))
        givers = sorted(state.ids, key=lambda m: (-state.count(m), m))
        move = None
        for taker in takers:
            for giver in givers:
                if state.count(giver) < state.count(taker) + 2:
                    break
                movable = [tp for tp in state.held[giver] if tp.topic in state.eligible[taker]]
                if movable:
                    move = max(movable, key=lambda tp: (tp not in before[giver], tp)), taker
                    break
            if move is not None:
                break
        if move is None:
            return
        state.give(*move)


def assign(members: Sequence[MemberSubscription], partitions: Mapping[str, int]) -> Assignment:
    if not members:
        return {}
    state = _State(members, partitions)
    all_tps = subscribed_partitions(members, partitions)
    _keep_owned(state, members, partitions)
    if len(set(state.eligible.values())) == 1:
        _trim_to_quotas(state, len(all_tps))
    before = {m: frozenset(tps) for m, tps in state.held.items()}
    _fill(state, all_tps)
    _balance(state, before)
    return sorted_assignment(state.held)
