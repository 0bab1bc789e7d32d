"""PartitionStateRepo against a real Postgres: CAS semantics of ISR and leader changes,
controller fencing, producer ids, the cluster secret, migration 0002."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from metadata.brokers import BrokerRepo
from metadata.controller_lease import ControllerFence, ControllerLease
from metadata.db import make_engine, schema_revision
from metadata.db_errors import ConstraintViolation
from metadata.partition_state import PartitionStateRepo
from metadata.topics import TopicRepo
from metadata.types import PartitionRecord, TopicIdPartition
from tests.integration.schema_head import HEAD


@pytest.fixture
def brokers(db_engine: Engine) -> BrokerRepo:
    repo = BrokerRepo(db_engine)
    for i in (1, 2, 3):
        repo.register(i, f"http://127.0.0.1:{9000 + i}", 60_000)
    return repo


@pytest.fixture
def repo(db_engine: Engine) -> PartitionStateRepo:
    return PartitionStateRepo(db_engine)


@pytest.fixture
def part(db_engine: Engine, brokers: BrokerRepo) -> PartitionRecord:
    """Partition 0 of a new RF-3 topic: leader = replicas[0], ISR = replicas, epochs 0."""
    topics = TopicRepo(db_engine)
    topics.create("t", 1, 3)
    return topics.partitions("t")[0]


def alter(repo: PartitionStateRepo, p: PartitionRecord, isr: list[int]) -> PartitionRecord | None:
    assert p.leader is not None
    return repo.alter_isr(p.tp, p.leader, p.leader_epoch, p.partition_epoch, isr)


# -- migration 0002 -----------------------------------------------------------------------------


def test_schema_is_at_head(db_engine: Engine) -> None:
    assert schema_revision(db_engine) == HEAD


def test_cluster_secret_is_random_per_cluster_and_stable(
    repo: PartitionStateRepo, db_factory: Callable[..., str]
) -> None:
    secret = repo.cluster_secret()
    assert len(secret) == 64 and int(secret, 16) >= 0
    assert repo.cluster_secret() == secret
    # A database migrated from scratch gets its own secret. (db_factory clones one migrated
    # template, so clones share it; an empty database migrated here does not.)
    from metadata.db import migrate

    other = make_engine(db_factory(migrated=False))
    try:
        migrate(other)
        assert PartitionStateRepo(other).cluster_secret() not in ("", secret)
    finally:
        other.dispose()


def test_producer_ids_are_unique_even_when_racing(repo: PartitionStateRepo) -> None:
    first = repo.allocate_producer_id()
    assert first >= 0
    assert repo.allocate_producer_id() == first + 1
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda _: repo.allocate_producer_id(), range(64)))
    assert len(set(ids)) == 64 and min(ids) > first + 1


def test_database_refuses_an_isr_outside_the_replicas(
    db_engine: Engine, part: PartitionRecord
) -> None:
    with pytest.raises(ConstraintViolation), db_engine.begin() as conn:
        conn.execute(text("UPDATE partitions SET isr = '{1,2,3,99}'"))
    with pytest.raises(ConstraintViolation), db_engine.begin() as conn:
        conn.execute(text("UPDATE partitions SET isr = '{}'"))  # the leader must be in it


# -- alter_isr (the leader's AlterPartition) ----------------------------------------------------


def test_alter_isr_compare_and_set(repo: PartitionStateRepo, part: PartitionRecord) -> None:
    r = part.replicas
    shrunk = alter(repo, part, [r[2], r[0]])
    assert shrunk is not None
    assert shrunk.isr == [r[0], r[2]]  # stored in replica order
    assert (shrunk.leader, shrunk.leader_epoch, shrunk.partition_epoch) == (r[0], 0, 1)
    assert repo.get(part.tp) == shrunk
    # The same request again carries a stale partition epoch: it loses, and changes nothing.
    assert alter(repo, part, [r[0]]) is None
    # A stale leader epoch or a broker that is not the leader loses too.
    assert repo.alter_isr(part.tp, r[0], 7, 1, [r[0]]) is None
    assert repo.alter_isr(part.tp, r[1], 0, 1, [r[1]]) is None
    assert (
        repo.alter_isr(TopicIdPartition(part.topic_id, 9), r[0], 0, 1, [r[0]]) is None
    )  # no such partition
    assert repo.get(part.tp) == shrunk
    grown = alter(repo, shrunk, r)
    assert grown is not None and grown.isr == r and grown.partition_epoch == 2


def test_alter_isr_rejects_invalid_isrs(repo: PartitionStateRepo, part: PartitionRecord) -> None:
    r = part.replicas
    with pytest.raises(ValueError, match="leader"):
        alter(repo, part, [r[1], r[2]])
    with pytest.raises(ValueError, match="non-replicas"):
        alter(repo, part, [r[0], 99])
    with pytest.raises(ValueError):
        alter(repo, part, [r[0], True])
    assert repo.get(part.tp) == part


def test_alter_isr_refuses_to_add_a_dead_broker(
    repo: PartitionStateRepo, brokers: BrokerRepo, part: PartitionRecord
) -> None:
    r = part.replicas
    shrunk = alter(repo, part, [r[0]])
    assert shrunk is not None
    brokers.deregister(r[1])
    assert alter(repo, shrunk, [r[0], r[1]]) is None  # a zombie replica cannot rejoin
    grown = alter(repo, shrunk, [r[0], r[2]])
    assert grown is not None and grown.isr == [r[0], r[2]]
    # Keeping a dead member (rather than adding one) is the leader's call: allowed.
    brokers.deregister(r[2])
    same = alter(repo, grown, [r[0], r[2]])
    assert same is not None and same.partition_epoch == grown.partition_epoch + 1


def test_concurrent_alter_isr_exactly_one_wins(
    repo: PartitionStateRepo, part: PartitionRecord
) -> None:
    r = part.replicas
    barrier = threading.Barrier(8)

    def attempt(i: int) -> PartitionRecord | None:
        barrier.wait()
        return alter(repo, part, [r[0], r[1 + i % 2]])

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(attempt, range(8)))
    winners = [x for x in results if x is not None]
    assert len(winners) == 1
    assert repo.get(part.tp) == winners[0]
    assert winners[0].partition_epoch == 1


# -- elect_leader and controller_alter_isr ------------------------------------------------------


def test_a_leader_that_cannot_serve_resigns_to_a_live_isr_member(
    repo: PartitionStateRepo, part: PartitionRecord, brokers: BrokerRepo
) -> None:
    """A leader whose log went offline hands off: the first live ISR member in replica order
    leads in a new leader epoch, and the resigning broker leaves the ISR."""
    leader, second, third = part.replicas
    stale = repo.hand_over(part.tp, leader, part.leader_epoch, part.partition_epoch + 1)
    assert stale is None  # fenced on the leader's epochs, like alter_isr
    brokers.deregister(second)  # not live: skipped
    out = repo.hand_over(part.tp, leader, part.leader_epoch, part.partition_epoch)
    assert out is not None
    assert (out.leader, out.leader_epoch) == (third, part.leader_epoch + 1)
    assert out.isr == [second, third] and leader not in out.isr
    # The new leader alone in its ISR with no live peer: it keeps leading (offline helps no one).
    alone = alter(repo, out, [third])
    assert alone is not None
    assert repo.hand_over(alone.tp, third, alone.leader_epoch, alone.partition_epoch) is None


def test_a_planned_hand_over_keeps_the_isr_and_needs_a_live_isr_member(
    repo: PartitionStateRepo, part: PartitionRecord, brokers: BrokerRepo
) -> None:
    leader, second, third = part.replicas
    shrunk = alter(repo, part, [leader, second])
    assert shrunk is not None
    args = (shrunk.tp, leader, shrunk.leader_epoch)
    assert repo.hand_over(*args, shrunk.partition_epoch, to=third) is None  # not in the ISR
    moved = repo.hand_over(*args, shrunk.partition_epoch, to=second)
    assert moved is not None
    assert (moved.leader, moved.isr, moved.leader_epoch) == (
        second,
        [leader, second],
        shrunk.leader_epoch + 1,
    )


def test_elect_leader_bumps_both_epochs(repo: PartitionStateRepo, part: PartitionRecord) -> None:
    r = part.replicas
    info = repo.elect_leader(part.tp, r[1], [r[2], r[1]], 0)
    assert info is not None
    assert (info.leader, info.isr, info.leader_epoch, info.partition_epoch) == (
        r[1],
        [r[1], r[2]],
        1,
        1,
    )
    assert repo.elect_leader(part.tp, r[2], [r[2]], 0) is None  # stale epoch
    # The old leader's AlterPartition is fenced by the leader epoch.
    assert repo.alter_isr(part.tp, r[0], 0, 1, [r[0]]) is None
    offline = repo.elect_leader(part.tp, None, [r[1]], 1)
    assert offline is not None and offline.leader is None and offline.isr == [r[1]]
    assert offline.leader_epoch == 2 and offline.partition_epoch == 2
    with pytest.raises(ValueError, match="must be in the new ISR"):
        repo.elect_leader(part.tp, r[0], [r[1]], 2)
    with pytest.raises(ValueError, match="non-replicas"):
        repo.elect_leader(part.tp, 42, [42], 2)
    assert repo.get(part.tp) == offline


def test_concurrent_elect_leader_exactly_one_wins(
    repo: PartitionStateRepo, part: PartitionRecord
) -> None:
    r = part.replicas
    barrier = threading.Barrier(6)

    def attempt(i: int) -> PartitionRecord | None:
        barrier.wait()
        if i % 2:  # a leader's AlterPartition racing with the controller's elections
            return alter(repo, part, [r[0], r[1]])
        return repo.elect_leader(part.tp, r[i % 3], r, 0)

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(attempt, range(6)))
    winners = [x for x in results if x is not None]
    assert len(winners) == 1 and repo.get(part.tp) == winners[0]


def test_controller_alter_isr_keeps_the_leader_epoch(
    repo: PartitionStateRepo, part: PartitionRecord
) -> None:
    r = part.replicas
    info = repo.controller_alter_isr(part.tp, [r[0], r[2]], 0)
    assert info is not None
    assert (info.leader, info.isr, info.leader_epoch, info.partition_epoch) == (
        r[0],
        [r[0], r[2]],
        0,
        1,
    )
    assert repo.controller_alter_isr(part.tp, [r[0]], 0) is None  # stale
    with pytest.raises(ValueError, match="keep the leader"):
        repo.controller_alter_isr(part.tp, [r[2]], 1)
    # The leader still leads at epoch 0, but must re-read the partition epoch.
    assert repo.alter_isr(part.tp, r[0], 0, 0, r) is None
    assert repo.alter_isr(part.tp, r[0], 0, 1, r) is not None


def test_controller_changes_are_fenced_on_the_lease(
    db_engine: Engine, repo: PartitionStateRepo, brokers: BrokerRepo, part: PartitionRecord
) -> None:
    lease = ControllerLease(db_engine)
    epoch = lease.try_acquire(1, 60_000)
    assert epoch is not None
    r = part.replicas
    stale = ControllerFence(1, epoch - 1)
    assert repo.controller_alter_isr(part.tp, [r[0]], 0, stale) is None
    assert repo.elect_leader(part.tp, r[1], [r[1]], 0, ControllerFence(2, epoch)) is None
    assert repo.get(part.tp) == part
    info = repo.elect_leader(part.tp, r[1], [r[1]], 0, ControllerFence(1, epoch))
    assert info is not None and info.leader == r[1]
    lease.release(1)  # a resigned controller writes nothing more
    assert repo.controller_alter_isr(part.tp, [r[1]], 1, ControllerFence(1, epoch)) is None


def test_every_change_bumps_the_metadata_version(
    db_engine: Engine, repo: PartitionStateRepo, part: PartitionRecord
) -> None:
    topics = TopicRepo(db_engine)
    r = part.replicas
    versions = [topics.version()]
    steps: list[Callable[[], PartitionRecord | None]] = [
        lambda: repo.alter_isr(part.tp, r[0], 0, 0, [r[0], r[1]]),
        lambda: repo.controller_alter_isr(part.tp, [r[0]], 1),
        lambda: repo.elect_leader(part.tp, r[0], [r[0]], 2),
    ]
    for step in steps:
        assert step() is not None
        versions.append(topics.version())
    assert versions == sorted(set(versions)) and len(versions) == 4
    assert repo.elect_leader(part.tp, r[0], [r[0]], 0) is None
    assert repo.allocate_producer_id() >= 0
    assert topics.version() == versions[-1]  # lost races and producer ids change nothing
    assert Counter(versions).most_common(1)[0][1] == 1
