"""The assignors against the examples in Kafka's javadoc for each of them."""

from __future__ import annotations

from groups.assignors import ASSIGNORS, cooperative_sticky, roundrobin, sticky
from groups.assignors import range as range_assignor
from groups.assignors.base import Assignment, MemberSubscription
from metadata.types import TopicNamePartition


def tps(*names: str) -> list[TopicNamePartition]:
    """Names like "t0p1" → TopicNamePartition("t0", 1), sorted."""
    out = []
    for name in names:
        topic, p = name.split("p")
        out.append(TopicNamePartition(topic, int(p)))
    return sorted(out)


def sub(member_id: str, *topics: str, owned: list[TopicNamePartition] | None = None):
    return MemberSubscription(member_id, frozenset(topics), frozenset(owned or []))


def resubscribe(previous: Assignment, members: list[MemberSubscription]):
    """The same members, each holding what `previous` gave it."""
    return [m._replace(owned=frozenset(previous.get(m.member_id, []))) for m in members]


def test_registry_names_are_kafkas() -> None:
    assert set(ASSIGNORS) == {"range", "roundrobin", "sticky", "cooperative-sticky"}


# -- RangeAssignor ------------------------------------------------------------------------------


def test_range_javadoc_example() -> None:
    # C0, C1; t0, t1 with 3 partitions each.
    members = [sub("C0", "t0", "t1"), sub("C1", "t0", "t1")]
    got = range_assignor.assign(members, {"t0": 3, "t1": 3})
    assert got == {"C0": tps("t0p0", "t0p1", "t1p0", "t1p1"), "C1": tps("t0p2", "t1p2")}


def test_range_per_topic_with_different_subscriptions() -> None:
    members = [sub("C0", "t0"), sub("C1", "t0", "t1"), sub("C2", "t1")]
    got = range_assignor.assign(members, {"t0": 3, "t1": 2, "unused": 4})
    assert got == {"C0": tps("t0p0", "t0p1"), "C1": tps("t0p2", "t1p0"), "C2": tps("t1p1")}


def test_range_more_members_than_partitions_and_missing_topic() -> None:
    members = [sub("a", "t"), sub("b", "t"), sub("c", "t", "missing")]
    assert range_assignor.assign(members, {"t": 2}) == {
        "a": tps("tp0"),
        "b": tps("tp1"),
        "c": [],
    }


# -- RoundRobinAssignor -------------------------------------------------------------------------


def test_roundrobin_javadoc_example_equal_subscriptions() -> None:
    members = [sub("C0", "t0", "t1"), sub("C1", "t0", "t1")]
    got = roundrobin.assign(members, {"t0": 3, "t1": 3})
    assert got == {"C0": tps("t0p0", "t0p2", "t1p1"), "C1": tps("t0p1", "t1p0", "t1p2")}


def test_roundrobin_javadoc_example_different_subscriptions() -> None:
    # C0 on t0; C1 on t0, t1; C2 on t0, t1, t2; t0, t1, t2 have 1, 2, 3 partitions.
    members = [sub("C0", "t0"), sub("C1", "t0", "t1"), sub("C2", "t0", "t1", "t2")]
    got = roundrobin.assign(members, {"t0": 1, "t1": 2, "t2": 3})
    assert got == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0"),
        "C2": tps("t1p1", "t2p0", "t2p1", "t2p2"),
    }


def test_roundrobin_after_c1_leaves_moves_partitions_sticky_keeps() -> None:
    # Sticky javadoc example 1, round robin's side: C1 removed → C0 and C2 re-dealt from
    # scratch, so partitions C0 and C2 held move too.
    members = [sub("C0", *TOPICS4), sub("C2", *TOPICS4)]
    got = roundrobin.assign(members, PARTS4)
    assert got == {
        "C0": tps("t0p0", "t1p0", "t2p0", "t3p0"),
        "C2": tps("t0p1", "t1p1", "t2p1", "t3p1"),
    }


# -- StickyAssignor -----------------------------------------------------------------------------

TOPICS4 = ("t0", "t1", "t2", "t3")
PARTS4 = {t: 2 for t in TOPICS4}


def test_sticky_javadoc_example_1() -> None:
    # Three members on t0..t3 with 2 partitions each: the same as round robin from scratch.
    members = [sub("C0", *TOPICS4), sub("C1", *TOPICS4), sub("C2", *TOPICS4)]
    first = sticky.assign(members, PARTS4)
    assert first == {
        "C0": tps("t0p0", "t1p1", "t3p0"),
        "C1": tps("t0p1", "t2p0", "t3p1"),
        "C2": tps("t1p0", "t2p1"),
    }
    assert first == roundrobin.assign(members, PARTS4)
    # C1 leaves: every partition C0 and C2 held stays where it was.
    remaining = resubscribe(first, [members[0], members[2]])
    second = sticky.assign(remaining, PARTS4)
    assert second == {
        "C0": tps("t0p0", "t1p1", "t3p0", "t2p0"),
        "C2": tps("t1p0", "t2p1", "t0p1", "t3p1"),
    }


def test_sticky_javadoc_example_2() -> None:
    # C0 on t0; C1 on t0, t1; C2 on t0, t1, t2 (1, 2, 3 partitions): more balanced than
    # round robin's [t0p0] / [t1p0] / [t1p1, t2p0, t2p1, t2p2].
    parts = {"t0": 1, "t1": 2, "t2": 3}
    members = [sub("C0", "t0"), sub("C1", "t0", "t1"), sub("C2", "t0", "t1", "t2")]
    first = sticky.assign(members, parts)
    assert first == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0", "t1p1"),
        "C2": tps("t2p0", "t2p1", "t2p2"),
    }
    # C0 leaves: sticky preserves 5 assignments (round robin only 3).
    second = sticky.assign(resubscribe(first, members[1:]), parts)
    assert second == {"C1": tps("t1p0", "t1p1", "t0p0"), "C2": tps("t2p0", "t2p1", "t2p2")}
    rr = roundrobin.assign(members[1:], parts)
    assert rr == {"C1": tps("t0p0", "t1p1"), "C2": tps("t1p0", "t2p0", "t2p1", "t2p2")}


def test_sticky_new_member_takes_only_what_balance_needs() -> None:
    members = [sub("a", "t"), sub("b", "t")]
    first = sticky.assign(members, {"t": 6})
    joined = [*resubscribe(first, members), sub("c", "t")]
    second = sticky.assign(joined, {"t": 6})
    moved = {tp for m in ("a", "b") for tp in first[m]} - {
        tp for m in ("a", "b") for tp in second[m]
    }
    assert len(second["c"]) == 2 and set(second["c"]) == moved
    assert all(set(second[m]) <= set(first[m]) for m in ("a", "b"))


def test_sticky_drops_partitions_of_unsubscribed_topics_and_deleted_partitions() -> None:
    members = [
        sub("a", "t", owned=tps("tp0", "tp1", "up0", "tp7")),
        sub("b", "t", "u", owned=tps("tp2")),
    ]
    got = sticky.assign(members, {"t": 4, "u": 1})
    # a keeps tp0, tp1 (not up0: no longer subscribed; not tp7: gone); b keeps tp2. Free: up0
    # (only b can take it) first, then tp3 to the least loaded, a (tie, lowest id).
    assert got == {"a": tps("tp0", "tp1", "tp3"), "b": tps("tp2", "up0")}


# -- CooperativeStickyAssignor ------------------------------------------------------------------


def test_cooperative_sticky_target_is_sticky_and_first_round_withholds_moves() -> None:
    members = [sub("C0", *TOPICS4), sub("C1", *TOPICS4), sub("C2", *TOPICS4)]
    first = cooperative_sticky.assign(members, PARTS4)
    assert first == sticky.assign(members, PARTS4)
    # From scratch nothing is held, so nothing has to be revoked first.
    assert cooperative_sticky.assign_first_round(members, PARTS4) == first
    # A fourth member joins: the target moves two partitions to C3; the first round gives C3
    # nothing yet (both are still held) and the others keep everything that stays.
    joined = [*resubscribe(first, members), sub("C3", *TOPICS4)]
    target = cooperative_sticky.assign(joined, PARTS4)
    assert all(len(v) == 2 for v in target.values())
    first_round = cooperative_sticky.assign_first_round(joined, PARTS4)
    assert first_round["C3"] == []
    for m in ("C0", "C1", "C2"):
        assert first_round[m] == target[m]
        assert set(target[m]) <= set(first[m])  # only partitions that move are revoked


def test_cooperative_sticky_gives_free_partitions_at_once() -> None:
    # C1 left: its partitions are held by nobody, so C0 and C2 get them in the first round.
    first = sticky.assign([sub(m, *TOPICS4) for m in ("C0", "C1", "C2")], PARTS4)
    remaining = resubscribe(first, [sub("C0", *TOPICS4), sub("C2", *TOPICS4)])
    first_round = cooperative_sticky.assign_first_round(remaining, PARTS4)
    assert first_round == cooperative_sticky.assign(remaining, PARTS4)
