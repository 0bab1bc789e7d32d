"""The group coordinator against a real Postgres: reconciliation, fencing, expiry, commits,
resets, and the one safety rule — no partition is ever given to two members at once."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from groups import requests
from groups.coordinator import Assigned, GroupCoordinator
from groups.deps import blocking
from groups.reconcile import to_set
from groups.requests import CommitRequest, HeartbeatRequest, JoinRequest, OffsetEntry
from groups.sweeper import sweep_once
from logformat.errors import ErrorCode, TierlogError
from metadata.brokers import BrokerRepo
from metadata.groups import GroupRepo
from metadata.topics import TopicRepo
from metadata.types import TopicNamePartition

G = "g"


@pytest.fixture
def topics(db_engine: Engine) -> TopicRepo:
    BrokerRepo(db_engine).register(1, "http://127.0.0.1:9001", 600_000)
    repo = TopicRepo(db_engine)
    repo.create("t", 6, 1)
    repo.create("u", 2, 1)
    return repo


@pytest.fixture
def coord(db_engine: Engine, topics: TopicRepo) -> GroupCoordinator:
    return GroupCoordinator(GroupRepo(db_engine), "cooperative-sticky")


def raises(code: ErrorCode, fn, *args) -> TierlogError:
    with pytest.raises(TierlogError) as e:
        fn(*args)
    assert e.value.code is code, e.value
    return e.value


class Members:
    """Well-behaved members: each consumes exactly what its last answer gave it, reports
    that as `owned`, and the test checks after every answer that no two overlap."""

    def __init__(self, coord: GroupCoordinator, group: str = G) -> None:
        self.coord, self.group = coord, group
        self.owned: dict[str, set[TopicNamePartition]] = {}
        self.epoch: dict[str, int] = {}

    def _took(self, a: Assigned) -> Assigned:
        self.owned[a.member_id] = to_set(a.assignment)
        self.epoch[a.member_id] = a.member_epoch
        held = Counter(tp for tps in self.owned.values() for tp in tps)
        assert all(n == 1 for n in held.values()), f"two owners: {held}"
        return a

    def join(self, topics=("t",), assignor=None, session_ms=30_000) -> str:
        a = self.coord.join(self.group, JoinRequest(tuple(topics), assignor, session_ms))
        return self._took(a).member_id

    def beat(self, m: str, topics=None) -> Assigned:
        req = HeartbeatRequest(self.epoch[m], frozenset(self.owned[m]), topics)
        return self._took(self.coord.heartbeat(self.group, m, req))

    def leave(self, m: str) -> None:
        self.coord.leave(self.group, m)
        del self.owned[m], self.epoch[m]

    def settle(self, rounds: int = 6) -> None:
        for _ in range(rounds):
            for m in sorted(self.owned):
                self.beat(m)

    def counts(self) -> list[int]:
        return sorted(len(v) for v in self.owned.values())


def test_tables_and_offsets_cascade_with_the_topic(
    db_engine: Engine, coord: GroupCoordinator, topics: TopicRepo
) -> None:
    coord.commit(G, CommitRequest(None, None, (OffsetEntry("u", 1, 7, "m"),)))
    assert [o.offset for o in coord.repo.offsets(G) or []] == [7]
    topics.delete("u")
    assert coord.repo.offsets(G) == []
    with db_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM consumer_groups")).scalar() == 1


def test_first_member_gets_everything_and_second_waits_for_the_handover(
    coord: GroupCoordinator,
) -> None:
    ms = Members(coord)
    a = ms.join()
    assert ms.owned[a] == {TopicNamePartition("t", p) for p in range(6)}
    assert ms.epoch[a] == 1
    b = ms.join()
    assert ms.owned[b] == set()  # everything is still a's
    snap = coord.repo.read(G)
    assert snap is not None and snap.group.state == "reconciling"
    first = ms.beat(a)  # a is told to give up three partitions (cooperative: only those)
    assert len(to_set(first.assignment)) == 3 and first.member_epoch == 2
    assert ms.beat(b).assignment == {}  # a still reported owning them in that heartbeat
    ms.beat(a)  # a now reports only its three
    assert len(to_set(ms.beat(b).assignment)) == 3
    ms.settle(1)
    snap = coord.repo.read(G)
    assert snap is not None and snap.group.state == "stable" and snap.group.group_epoch == 2


def test_owned_left_out_of_a_heartbeat_means_unchanged_not_released(
    coord: GroupCoordinator,
) -> None:
    """Kafka's heartbeat sends null owned partitions when they did not change: the member still
    consumes what it last reported, so its partitions must not go to the next owner yet."""
    everything = frozenset(TopicNamePartition("t", p) for p in range(6))
    a = coord.join(G, JoinRequest(("t",), None, 30_000))
    b = coord.join(G, JoinRequest(("t",), None, 30_000))
    told = coord.heartbeat(G, a.member_id, HeartbeatRequest(a.member_epoch, everything, None))
    assert len(to_set(told.assignment)) == 3  # a is to give up three, and has not yet
    coord.heartbeat(G, a.member_id, HeartbeatRequest(told.member_epoch, None, None))
    waiting = coord.heartbeat(G, b.member_id, HeartbeatRequest(b.member_epoch, frozenset(), None))
    assert waiting.assignment == {}
    kept = frozenset(to_set(told.assignment))
    coord.heartbeat(G, a.member_id, HeartbeatRequest(told.member_epoch, kept, None))
    given = coord.heartbeat(
        G, b.member_id, HeartbeatRequest(waiting.member_epoch, frozenset(), None)
    )
    assert to_set(given.assignment) == everything - kept


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_random_membership_changes_never_give_a_partition_twice(
    coord: GroupCoordinator, assignor: str
) -> None:
    rnd = random.Random(assignor)
    ms = Members(coord)
    for _ in range(60):
        op = rnd.random()
        if op < 0.2 or not ms.owned:
            ms.join(rnd.choice([("t",), ("t", "u"), ("u",)]), assignor)
        elif op < 0.3 and len(ms.owned) > 1:
            ms.leave(rnd.choice(sorted(ms.owned)))
        elif op < 0.35:
            ms.beat(rnd.choice(sorted(ms.owned)), topics=rnd.choice([("t",), ("t", "u")]))
        else:
            ms.beat(rnd.choice(sorted(ms.owned)))
    ms.settle()
    snap = coord.repo.read(G)
    assert snap is not None and snap.group.state == "stable"
    subscribed = {t for m in snap.members for t in m.topics}
    every = {
        TopicNamePartition(t, p)
        for t, n in (("t", 6), ("u", 2))
        if t in subscribed
        for p in range(n)
    }
    assert set().union(*ms.owned.values()) == every
    for m in snap.members:
        assert to_set(m.assigned) == to_set(m.target) == ms.owned[m.member_id]


def test_member_epochs_fence_heartbeats_and_commits(coord: GroupCoordinator) -> None:
    ms = Members(coord)
    a = ms.join()
    ms.join()
    ms.beat(a)  # epoch 2 (revocation)
    ms.join()
    ms.beat(a)  # epoch 3 (another)
    ms.settle(2)
    assert ms.epoch[a] == 3
    # The previous epoch is still accepted (its answer may have been lost) ...
    coord.heartbeat(G, a, HeartbeatRequest(2, frozenset(ms.owned[a]), None))
    # ... older ones are fenced, and so are future ones.
    for wrong in (1, 4):
        raises(
            ErrorCode.FENCED_MEMBER_EPOCH,
            coord.heartbeat,
            G,
            a,
            HeartbeatRequest(wrong, frozenset(), None),
        )
    raises(
        ErrorCode.UNKNOWN_MEMBER_ID,
        coord.heartbeat,
        G,
        "nobody",
        HeartbeatRequest(1, frozenset(), None),
    )
    raises(
        ErrorCode.UNKNOWN_MEMBER_ID,
        coord.heartbeat,
        "no-group",
        a,
        HeartbeatRequest(1, frozenset(), None),
    )
    mine = sorted(ms.owned[a])[0]
    theirs = next(
        tp for tp in (TopicNamePartition("t", p) for p in range(6)) if tp not in ms.owned[a]
    )
    ok = CommitRequest(a, 3, (OffsetEntry(mine.topic, mine.partition, 42, "x"),))
    assert coord.commit(G, ok) == ok.offsets
    raises(ErrorCode.STALE_MEMBER_EPOCH, coord.commit, G, ok._replace(member_epoch=2))
    foreign = ok._replace(offsets=(OffsetEntry(theirs.topic, theirs.partition, 1, None),))
    raises(ErrorCode.STALE_MEMBER_EPOCH, coord.commit, G, foreign)
    raises(ErrorCode.UNKNOWN_MEMBER_ID, coord.commit, G, ok._replace(member_id="nobody"))
    # Outside membership only while the group is empty.
    raises(
        ErrorCode.UNKNOWN_MEMBER_ID, coord.commit, G, ok._replace(member_id=None, member_epoch=None)
    )
    unknown = ok._replace(offsets=(OffsetEntry(mine.topic, 99, 1, None),))
    raises(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, coord.commit, G, unknown)
    [row] = coord.repo.offsets(G) or []
    assert (row.topic, row.partition, row.offset, row.metadata) == (
        mine.topic,
        mine.partition,
        42,
        "x",
    )


def test_rejoin_with_epoch_zero_starts_over_under_the_same_id(coord: GroupCoordinator) -> None:
    ms = Members(coord)
    a = ms.join()
    answer = coord.heartbeat(G, a, HeartbeatRequest(0, frozenset(), None))
    assert to_set(answer.assignment) == ms.owned[a]  # nobody else holds them: given again


def test_a_lapsed_member_is_removed_on_the_next_access_and_its_partitions_move(
    coord: GroupCoordinator,
) -> None:
    ms = Members(coord)
    a = ms.join(session_ms=60_000)
    b = ms.join(session_ms=requests.MIN_SESSION_MS)
    ms.settle(3)
    assert ms.counts() == [3, 3]
    time.sleep(requests.MIN_SESSION_MS / 1000 + 0.3)
    del ms.owned[b]  # b is silent: it stopped consuming when its session lapsed
    ms.beat(a)
    assert len(ms.owned[a]) == 6
    raises(
        ErrorCode.UNKNOWN_MEMBER_ID, coord.heartbeat, G, b, HeartbeatRequest(1, frozenset(), None)
    )
    snap = coord.repo.read(G)
    assert snap is not None and [m.member_id for m in snap.members] == [a]


def test_the_sweep_expires_members_of_untouched_groups(coord: GroupCoordinator) -> None:
    ms = Members(coord)
    ms.join(session_ms=requests.MIN_SESSION_MS)
    ms.join(session_ms=60_000)
    time.sleep(requests.MIN_SESSION_MS / 1000 + 0.3)
    assert coord.repo.lapsed() == [G]
    import asyncio

    assert asyncio.run(sweep_once(coord, blocking(None))) == 1
    assert coord.repo.lapsed() == []
    snap = coord.repo.read(G)
    assert snap is not None and len(snap.members) == 1
    assert len(to_set(snap.members[0].target)) == 6


def test_subscription_changes_topic_growth_and_assignor_votes(
    coord: GroupCoordinator, topics: TopicRepo
) -> None:
    ms = Members(coord)
    a = ms.join(("t",), "range")
    b = ms.join(("t",), "range")
    ms.settle(3)
    snap = coord.repo.read(G)
    assert snap is not None and snap.group.assignor == "range"
    first = min(a, b)  # range: member ids in order take consecutive ranges
    assert ms.owned[first] == {TopicNamePartition("t", p) for p in (0, 1, 2)}
    ms.beat(b, topics=("t", "u"))
    ms.settle(3)
    assert TopicNamePartition("u", 0) in ms.owned[b] and TopicNamePartition("u", 1) in ms.owned[b]
    topics.add_partitions("t", 8)
    ms.settle(3)
    assert set().union(*ms.owned.values()) >= {
        TopicNamePartition("t", 6),
        TopicNamePartition("t", 7),
    }
    c = ms.join(("t",), "roundrobin")
    ms.join(("t",), "roundrobin")
    ms.settle(4)
    snap = coord.repo.read(G)
    assert snap is not None and snap.group.assignor == "range"  # a 2-2 tie keeps the current
    ms.leave(a)
    ms.settle(4)
    snap = coord.repo.read(G)
    assert snap is not None and snap.group.assignor == "roundrobin" and c in ms.owned


def test_reset_only_while_the_group_is_empty(coord: GroupCoordinator) -> None:
    ms = Members(coord)
    a = ms.join()
    raises(ErrorCode.NON_EMPTY_GROUP, coord.reset, G, [OffsetEntry("t", 0, 5, None)])
    ms.leave(a)
    coord.reset(G, [OffsetEntry("t", 0, 5, None), OffsetEntry("t", 1, 0, None)])
    assert [(o.partition, o.offset) for o in coord.repo.offsets(G) or []] == [(0, 5), (1, 0)]
    raises(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, coord.reset, G, [OffsetEntry("nope", 0, 1, None)])


def test_concurrent_heartbeats_serialize_on_the_group(coord: GroupCoordinator) -> None:
    members = [coord.join(G, JoinRequest(("t", "u"), None, 30_000)) for _ in range(4)]
    errors: list[BaseException] = []
    log: list[tuple[float, float, str, frozenset[TopicNamePartition]]] = []
    lock = threading.Lock()

    def run(first: Assigned) -> None:
        owned, epoch = to_set(first.assignment), first.member_epoch
        since = time.monotonic()
        try:
            for _ in range(25):
                sent = time.monotonic()
                a = coord.heartbeat(
                    G, first.member_id, HeartbeatRequest(epoch, frozenset(owned), None)
                )
                got = time.monotonic()
                with lock:  # ownership interval of the previous holding ends when we report
                    log.append((since, sent, first.member_id, frozenset(owned)))
                owned, epoch, since = to_set(a.assignment), a.member_epoch, got
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(m,)) for m in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    # Intervals [got answer, sent the heartbeat that stopped reporting it] never overlap
    # between members for one partition.
    for i, (s1, e1, m1, o1) in enumerate(log):
        for s2, e2, m2, o2 in log[i + 1 :]:
            if m1 != m2 and o1 & o2:
                assert e1 <= s2 or e2 <= s1, (m1, m2, o1 & o2)
