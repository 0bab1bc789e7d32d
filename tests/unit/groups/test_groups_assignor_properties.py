"""Properties every assignor keeps, and the sticky ones' balance and stickiness (hypothesis)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groups.assignors import ASSIGNORS, cooperative_sticky, sticky
from groups.assignors.base import (
    Assignment,
    MemberSubscription,
    TopicNamePartition,
    subscribed_partitions,
)

TOPICS = ("t0", "t1", "t2", "t3")
STICKY = (sticky.assign, cooperative_sticky.assign)


@st.composite
def groups(draw: st.DrawFn, equal: bool | None = None):
    """(members, partition counts): random holdings, including partitions that no longer
    exist or belong to topics the member left, and partitions two members both claim."""
    counts = {t: draw(st.integers(0, 7)) for t in TOPICS}
    partitions = {t: n for t, n in counts.items() if n > 0 or draw(st.booleans())}
    n = draw(st.integers(1, 7))
    same = draw(st.booleans()) if equal is None else equal
    shared = frozenset(draw(st.sets(st.sampled_from(TOPICS), min_size=1)))
    universe = [TopicNamePartition(t, p) for t in TOPICS for p in range(8)]
    members = []
    for i in range(n):
        topics = shared if same else frozenset(draw(st.sets(st.sampled_from(TOPICS))))
        owned = frozenset(draw(st.sets(st.sampled_from(universe), max_size=10)))
        members.append(MemberSubscription(f"m{i:02d}", topics, owned))
    return draw(st.permutations(members)), partitions


def check_complete(members: list[MemberSubscription], partitions, got: Assignment) -> None:
    assert set(got) == {m.member_id for m in members}
    assigned = Counter(tp for tps in got.values() for tp in tps)
    assert all(c == 1 for c in assigned.values()), "a partition assigned twice"
    assert set(assigned) == set(subscribed_partitions(members, partitions))
    topics = {m.member_id: m.topics for m in members}
    for member_id, tps in got.items():
        assert tps == sorted(tps)
        assert all(tp.topic in topics[member_id] for tp in tps), "assigned to a non-subscriber"


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
@settings(max_examples=100, deadline=None)
@given(group=groups())
def test_every_partition_exactly_once_to_a_subscriber(name: str, group) -> None:
    members, partitions = group
    check_complete(members, partitions, ASSIGNORS[name](members, partitions))


@pytest.mark.parametrize("name", ["roundrobin", "sticky", "cooperative-sticky"])
@settings(max_examples=100, deadline=None)
@given(group=groups(equal=True))
def test_equal_subscriptions_are_balanced(name: str, group) -> None:
    members, partitions = group
    counts = [len(v) for v in ASSIGNORS[name](members, partitions).values()]
    assert max(counts) - min(counts) <= 1


@pytest.mark.parametrize("assign", STICKY)
@settings(max_examples=100, deadline=None)
@given(group=groups())
def test_sticky_is_balanced_in_kafkas_sense(assign, group) -> None:
    # No member could take a partition from a member holding two or more partitions more.
    members, partitions = group
    got = assign(members, partitions)
    topics = {m.member_id: m.topics for m in members}
    for taker, mine in got.items():
        for giver, theirs in got.items():
            if len(theirs) >= len(mine) + 2:
                assert not [tp for tp in theirs if tp.topic in topics[taker]], (taker, giver)


def _valid_holdings(members: list[MemberSubscription], partitions) -> dict[str, set]:
    """What each member may keep: existing partitions of its topics, first claim (by id) wins."""
    seen: set[TopicNamePartition] = set()
    out: dict[str, set] = {}
    for m in sorted(members, key=lambda m: m.member_id):
        ok = {
            tp
            for tp in m.owned
            if tp.topic in m.topics and tp.partition < partitions.get(tp.topic, 0)
        }
        out[m.member_id] = ok - seen
        seen |= ok
    return out


@pytest.mark.parametrize("assign", STICKY)
@settings(max_examples=100, deadline=None)
@given(group=groups(equal=True))
def test_sticky_moves_as_few_partitions_as_balance_allows(assign, group) -> None:
    members, partitions = group
    held = _valid_holdings(members, partitions)
    got = assign(members, partitions)
    kept = sum(len(held[m] & set(tps)) for m, tps in got.items())
    # The most a balanced assignment can keep: each member its quota, the members holding
    # the most getting the larger quotas.
    total = len(subscribed_partitions(members, partitions))
    quota, extra = divmod(total, len(members))
    by_holdings = sorted((len(h) for h in held.values()), reverse=True)
    best = sum(min(h, quota + (1 if i < extra else 0)) for i, h in enumerate(by_holdings))
    assert kept == best


@pytest.mark.parametrize("assign", STICKY)
@settings(max_examples=100, deadline=None)
@given(group=groups())
def test_sticky_is_stable_once_assigned(assign, group) -> None:
    # Assigning again from its own result changes nothing.
    members, partitions = group
    first = assign(members, partitions)
    again = [m._replace(owned=frozenset(first[m.member_id])) for m in members]
    assert assign(again, partitions) == first


@settings(max_examples=100, deadline=None)
@given(group=groups())
def test_cooperative_first_round_never_gives_a_partition_someone_else_holds(group) -> None:
    members, partitions = group
    first_round = cooperative_sticky.assign_first_round(members, partitions)
    target = cooperative_sticky.assign(members, partitions)
    holders = {tp: m.member_id for m in members for tp in m.owned}
    for member_id, tps in first_round.items():
        assert set(tps) <= set(target[member_id])
        for tp in set(target[member_id]) - set(tps):
            assert holders.get(tp) not in (None, member_id)
