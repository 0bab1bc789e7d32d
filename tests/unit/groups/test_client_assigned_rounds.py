"""Kafka's classic rounds with a client leader (groups/client_assigned.py), decided on
snapshots in process: who leads, which protocol wins, what a late member and a silent
leader cost, and that the leader's bytes are what members get."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cluster.kafka_groups import ClassicGroupError, Joined, JoinGroup, MemberAssignment
from groups import client_assigned as rounds
from groups.coordinator import _Draft
from metadata.types import GroupRow, GroupSnapshot, GroupWrite, TopicMeta, TopicNamePartition

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TOPICS = {"t": TopicMeta("00000000-0000-0000-0000-000000000001", 2)}


class Group:
    """A group's rows between decisions, as metadata/groups.py would keep them."""

    def __init__(self) -> None:
        self.row = GroupRow(1, "g", 0, "range", "empty", {}, T0)
        self.members: dict[str, object] = {}
        self.now = T0

    def decide(self, fn, *args):  # type: ignore[no-untyped-def]
        snap = GroupSnapshot(self.row, list(self.members.values()), TOPICS, self.now)  # type: ignore[arg-type]
        d = _Draft(snap)
        answer = fn(d, "g", *args)
        write: GroupWrite = d.finish()
        if write.group is not None:
            self.row = write.group
        for m in write.members:
            self.members[m.member_id] = m
        for gone in write.removed:
            self.members.pop(gone, None)
        return answer


def _join(g: Group, member_id: str, *protocols: str, timeout_ms: int = 10_000) -> str:
    req = JoinGroup(
        member_id,
        ("t",),
        frozenset(),
        protocols,
        6000,
        tuple((p, f"{p}-meta-{member_id or 'new'}".encode()) for p in protocols),
        timeout_ms,
    )
    got = g.decide(rounds.join, req)
    assert isinstance(got, str), got
    return got


def test_the_round_waits_for_every_member_and_the_leader_gets_their_metadata() -> None:
    g = Group()
    a = _join(g, "", "mine", "range")
    first = g.decide(rounds.await_join, a)
    assert isinstance(first, Joined) and first.leader == a and first.generation == 1
    assert g.decide(rounds.sync, a, 1, [MemberAssignment(a, b"A", ())]) == b"A"
    b = _join(g, "", "range", "mine")  # a new member opens a round: a must rejoin
    assert g.decide(rounds.await_join, b) is None
    assert isinstance(g.decide(rounds.heartbeat, a, 1), ClassicGroupError)  # REBALANCE
    _join(g, a, "mine", "range")
    leader = g.decide(rounds.await_join, a)
    assert isinstance(leader, Joined) and leader.leader == a and leader.generation == 2
    assert leader.assignor == "mine"  # a tie between the two votes: the first by name
    assert dict(leader.members) == {a: b"mine-meta-" + a.encode(), b: b"mine-meta-new"}
    follower = g.decide(rounds.await_join, b)
    assert isinstance(follower, Joined) and follower.members == ()  # only the leader's
    assert g.decide(rounds.sync, b, 2, []) is None  # the leader has not assigned yet
    given = [MemberAssignment(a, b"\x00user-data-a", ()), MemberAssignment(b, b"B", ())]
    assert g.decide(rounds.sync, a, 2, given) == b"\x00user-data-a"
    assert g.decide(rounds.sync, b, 2, []) == b"B"  # byte for byte
    assert g.decide(rounds.heartbeat, b, 2) is None


def test_a_member_that_does_not_rejoin_is_removed_at_the_deadline() -> None:
    g = Group()
    a = _join(g, "", "range", timeout_ms=5000)
    g.decide(rounds.await_join, a)
    g.decide(rounds.sync, a, 1, [MemberAssignment(a, b"A", ())])
    b = _join(g, "", "range")
    g.now += timedelta(seconds=4)
    assert g.decide(rounds.await_join, b) is None  # a is still expected
    g.now += timedelta(seconds=1.5)  # past a's rebalance timeout, within its 6 s session
    got = g.decide(rounds.await_join, b)
    assert isinstance(got, Joined) and got.leader == b and dict(got.members).keys() == {b}
    assert a not in g.members


def test_a_leader_that_never_assigns_is_replaced() -> None:
    g = Group()
    a = _join(g, "", "range", timeout_ms=3000)
    g.now += timedelta(milliseconds=1)  # a joined first: it leads
    b = _join(g, "", "range", timeout_ms=3000)
    g.decide(rounds.await_join, a)
    joined = g.decide(rounds.await_join, b)
    assert isinstance(joined, Joined) and joined.leader == a
    g.now += timedelta(seconds=4)  # a joined but never sent its SyncGroup
    refused = g.decide(rounds.sync, b, joined.generation, [])
    assert isinstance(refused, ClassicGroupError)
    assert refused.kafka_name == "REBALANCE_IN_PROGRESS" and a not in g.members


def test_a_member_sharing_no_protocol_is_refused() -> None:
    g = Group()
    _join(g, "", "range", "mine")
    req = JoinGroup("", ("t",), frozenset(), ("theirs",), 6000, (("theirs", b""),), 10_000)
    refused = g.decide(rounds.join, req)
    assert isinstance(refused, ClassicGroupError)
    assert refused.kafka_name == "INCONSISTENT_GROUP_PROTOCOL" and "theirs" in refused.message


def test_partitions_of_the_assignment_are_what_a_member_owns() -> None:
    g = Group()
    a = _join(g, "", "range")
    g.decide(rounds.await_join, a)
    mine = (TopicNamePartition("t", 0), TopicNamePartition("t", 1))
    g.decide(rounds.sync, a, 1, [MemberAssignment(a, b"A", mine)])
    member = g.members[a]
    assert member.assigned == member.owned == member.target == {"t": [0, 1]}  # type: ignore[attr-defined]


def _rejoin(g: Group, member_id: str, meta: bytes = b"m") -> str:
    req = JoinGroup(member_id, ("t",), frozenset(), ("range",), 6000, (("range", meta),), 10_000)
    got = g.decide(rounds.join, req)
    assert isinstance(got, str), got
    return got


def _stable_pair(g: Group) -> tuple[str, str]:
    """a leads, b follows; both in generation 2 with their assignments."""
    a = _rejoin(g, "")
    g.decide(rounds.await_join, a)
    g.decide(rounds.sync, a, 1, [MemberAssignment(a, b"A", ())])
    b = _rejoin(g, "")
    _rejoin(g, a)
    assert isinstance(g.decide(rounds.await_join, a), Joined)
    assert isinstance(g.decide(rounds.await_join, b), Joined)
    given = [MemberAssignment(a, b"A2", ()), MemberAssignment(b, b"B2", ())]
    assert g.decide(rounds.sync, a, 2, given) == b"A2"
    assert g.decide(rounds.sync, b, 2, []) == b"B2"
    return a, b


def test_a_follower_joining_again_unchanged_gets_the_generation_without_a_round() -> None:
    """Kafka's answer to a follower of a stable group that sends JoinGroup again with the same
    metadata (a client that gave up waiting for its answer and asked again: kafka-python does
    on a poll() timeout): the current generation, no rebalance for the others."""
    g = Group()
    a, b = _stable_pair(g)
    _rejoin(g, b)
    again = g.decide(rounds.await_join, b)
    assert isinstance(again, Joined) and (again.generation, again.leader) == (2, a)
    assert again.members == ()
    assert g.decide(rounds.heartbeat, a, 2) is None  # the leader is not asked to rejoin
    assert g.decide(rounds.sync, b, 2, []) == b"B2"  # its assignment stands


def test_a_leader_joining_again_or_changed_metadata_opens_a_round() -> None:
    g = Group()
    a, b = _stable_pair(g)
    _rejoin(g, a)  # the leader asks for a rebalance (its topics' partitions changed)
    refused = g.decide(rounds.heartbeat, b, 2)
    assert isinstance(refused, ClassicGroupError)
    assert refused.kafka_name == "REBALANCE_IN_PROGRESS"
    g2 = Group()
    a, b = _stable_pair(g2)
    _rejoin(g2, b, meta=b"other topics")  # a follower whose subscription changed
    refused = g2.decide(rounds.heartbeat, a, 2)
    assert isinstance(refused, ClassicGroupError)
    assert refused.kafka_name == "REBALANCE_IN_PROGRESS"


def test_joining_again_while_the_leader_assigns_answers_the_same_round() -> None:
    g = Group()
    a = _rejoin(g, "")
    g.decide(rounds.await_join, a)
    g.decide(rounds.sync, a, 1, [MemberAssignment(a, b"A", ())])
    b = _rejoin(g, "")
    _rejoin(g, a)
    g.decide(rounds.await_join, a)
    assert isinstance(g.decide(rounds.await_join, b), Joined)  # generation 2, syncing
    for member in (a, b):  # each asks again before the leader's SyncGroup
        _rejoin(g, member)
    leader = g.decide(rounds.await_join, a)
    assert isinstance(leader, Joined) and leader.generation == 2
    assert dict(leader.members).keys() == {a, b}  # the leader gets the metadata again
    follower = g.decide(rounds.await_join, b)
    assert isinstance(follower, Joined) and follower.generation == 2
    given = [MemberAssignment(a, b"A2", ()), MemberAssignment(b, b"B2", ())]
    assert g.decide(rounds.sync, a, 2, given) == b"A2"
    assert g.decide(rounds.sync, b, 2, []) == b"B2"
