"""The controller against a real Postgres: elections, offline partitions, unclean elections,
ISR fencing of dead brokers, restarts, lease handover (preferred-leader moves are the
leader's)."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import text
from sqlalchemy.engine import Engine

from cluster.clock import ManualClock
from ingest.metrics import ReplicationMetrics
from ingest.replication.controller import Controller, ControllerActions
from metadata.brokers import BrokerRepo
from metadata.controller_lease import ControllerLease
from metadata.partition_state import PartitionStateRepo
from metadata.topics import TopicRepo
from metadata.types import PartitionRecord

LONG = 60_000


class ControllerWorld:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.brokers = BrokerRepo(engine)
        self.topics = TopicRepo(engine)
        self.repo = PartitionStateRepo(engine)
        for i in (1, 2, 3):
            self.start(i)

    def start(self, broker_id: int) -> None:
        self.brokers.register(broker_id, f"http://127.0.0.1:{9000 + broker_id}", LONG)

    def kill(self, broker_id: int) -> None:
        self.brokers.deregister(broker_id)

    def controller(self, broker_id: int = 1) -> Controller:
        # Metrics of its own: several controllers share this process.
        return Controller(
            self.engine, broker_id, LONG, metrics=ReplicationMetrics(CollectorRegistry())
        )

    def topic(self, name: str = "t", **configs: object) -> PartitionRecord:
        self.topics.create(name, 1, 3, {k.replace("_", "."): v for k, v in configs.items()})
        return self.get(name)

    def get(self, name: str = "t") -> PartitionRecord:
        return self.topics.partitions(name)[0]

    def set_isr(self, p: PartitionRecord, isr: list[int]) -> PartitionRecord:
        """What the leader does (AlterPartition)."""
        assert p.leader is not None
        info = self.repo.alter_isr(p.tp, p.leader, p.leader_epoch, p.partition_epoch, isr)
        assert info is not None
        return info


@pytest.fixture
def cluster(db_engine: Engine) -> ControllerWorld:
    return ControllerWorld(db_engine)


def ticked(c: Controller) -> ControllerActions:
    result = c.tick()
    assert result.active
    return result


def test_nothing_to_do_in_a_healthy_cluster(cluster: ControllerWorld) -> None:
    before = cluster.topic()
    c = cluster.controller()
    first = ticked(c)
    assert first.epoch == 1 and first.scanned and first.actions == []
    second = ticked(c)  # nothing changed: the partition scan is skipped
    assert not second.scanned and second.actions == []
    assert cluster.get() == before


def test_only_the_lease_holder_acts(cluster: ControllerWorld) -> None:
    cluster.topic()
    one, two = cluster.controller(1), cluster.controller(2)
    assert ticked(one).epoch == 1
    cluster.kill(3)
    assert two.tick() == ControllerActions(active=False)
    assert two.epoch is None
    one.resign()
    assert ControllerLease(cluster.engine).holder() == (None, 1)
    took_over = two.tick()
    assert took_over.active and took_over.epoch == 2 and took_over.actions
    assert one.tick().active is False


def test_a_broker_that_is_not_the_controller_is_due_when_the_lease_may_lapse(
    cluster: ControllerWorld,
) -> None:
    """Controller.due: the broker's periodic tick skips the lease attempts that could only
    fail (the holder's lease still runs), and tries again when it may have lapsed or the
    metadata version moved."""
    clock = ManualClock()
    one = cluster.controller(1)
    two = Controller(
        cluster.engine, 2, LONG, metrics=ReplicationMetrics(CollectorRegistry()), clock=clock
    )
    assert two.due(7)  # nothing known yet
    assert ticked(one).epoch == 1
    assert one.due(7)  # the controller always is
    assert two.tick().active is False
    assert not two.due(7)  # broker 1's leases run for a minute: it waits a third of one
    clock.advance(LONG / 3000 - 1)
    assert not two.due(7)
    assert two.due(8)  # a version not seen before: once
    assert not two.due(8)
    clock.advance(1)
    assert two.due(8)
    assert two.tick().active is False
    cluster.brokers.register(1, "http://127.0.0.1:9001", 5_000)  # its broker lease: 5 s
    assert two.tick().active is False
    clock.advance(4.5)
    assert not two.due(8)
    clock.advance(0.5)
    assert two.due(8)  # when broker 1's lease may have lapsed
    one.resign()  # a release moves the metadata version: the broker ticks on that
    assert two.tick().epoch == 2
    assert two.due(9)


def test_election_picks_the_first_live_isr_member_in_replica_order(
    cluster: ControllerWorld,
) -> None:
    p = cluster.topic()
    r = p.replicas
    c = cluster.controller(r[2])
    v = cluster.topics.version()
    cluster.kill(r[0])
    result = ticked(c)
    assert result.kinds() == ["elect"]
    now = cluster.get()
    assert (now.leader, now.isr, now.leader_epoch) == (r[1], [r[1], r[2]], 1)
    assert cluster.topics.version() > v


def test_election_skips_replicas_outside_the_isr(cluster: ControllerWorld) -> None:
    p = cluster.topic()
    r = p.replicas
    cluster.set_isr(p, [r[0], r[2]])
    c = cluster.controller(r[1])  # live, first in order after r[0], but not in sync
    cluster.kill(r[0])
    assert ticked(c).kinds() == ["elect"]
    now = cluster.get()
    assert (now.leader, now.isr, now.leader_epoch) == (r[2], [r[2]], 1)


def test_offline_when_only_out_of_sync_replicas_live_then_isr_member_returns(
    cluster: ControllerWorld, caplog: pytest.LogCaptureFixture
) -> None:
    p = cluster.topic()
    r = p.replicas
    p = cluster.set_isr(p, [r[0]])
    c = cluster.controller(r[1])
    ticked(c)  # learns the brokers' incarnations
    cluster.kill(r[0])
    with caplog.at_level(logging.ERROR, logger="tierlog.controller"):
        result = ticked(c)
    assert result.kinds() == ["offline"]
    off = cluster.get()
    assert off.leader is None and off.isr == [r[0]]  # the last ISR is kept
    assert off.leader_epoch == 1
    assert any("is offline" in m for m in caplog.messages)
    # Stays offline without churning epochs.
    assert ticked(c).actions == []
    assert cluster.get() == off
    # The ISR member comes back: it is elected cleanly.
    cluster.start(r[0])
    result = ticked(c)
    assert result.kinds() == ["elect"]
    back = cluster.get()
    assert (back.leader, back.isr, back.leader_epoch) == (r[0], [r[0]], 2)


def test_unclean_election_when_the_topic_allows_it(
    cluster: ControllerWorld, caplog: pytest.LogCaptureFixture
) -> None:
    p = cluster.topic(unclean_leader_election_enable=True)
    r = p.replicas
    p = cluster.set_isr(p, [r[0]])
    c = cluster.controller(r[2])
    cluster.kill(r[0])
    with caplog.at_level(logging.WARNING, logger="tierlog.controller"):
        result = ticked(c)
    assert result.kinds() == ["unclean_elect"]
    now = cluster.get()
    assert (now.leader, now.isr, now.leader_epoch) == (r[1], [r[1]], 1)
    warnings = [rec for rec in caplog.records if rec.levelno == logging.WARNING]
    assert len(warnings) == 1
    msg = warnings[0].getMessage()
    assert "unclean leader election" in msg and "t-0" in msg
    assert f"new leader {r[1]}" in msg and f"old ISR {[r[0]]}" in msg
    assert warnings[0].__dict__["old_isr"] == [r[0]] and warnings[0].__dict__["leader"] == r[1]


def test_dead_isr_members_are_fenced_out_without_a_leader_epoch_bump(
    cluster: ControllerWorld,
) -> None:
    p = cluster.topic()
    r = p.replicas
    c = cluster.controller(r[0])
    v = cluster.topics.version()
    cluster.kill(r[2])
    result = ticked(c)
    assert result.kinds() == ["isr_shrink"]
    now = cluster.get()
    assert (now.leader, now.isr) == (r[0], [r[0], r[1]])
    assert now.leader_epoch == 0 and now.partition_epoch == 1
    assert cluster.topics.version() > v
    cluster.kill(r[1])
    ticked(c)
    assert cluster.get().isr == [r[0]]  # never below the leader
    assert ticked(c).actions == []


def test_moving_back_to_the_preferred_replica_is_left_to_the_leader(
    cluster: ControllerWorld,
) -> None:
    """Only the leader knows whether the preferred replica holds its acks=1 writes (issue 12,
    found 5): the controller elects on failures only (ingest/replication/preferred_leader.py
    moves back)."""
    p = cluster.topic()
    r = p.replicas
    c = cluster.controller(r[2])
    cluster.kill(r[0])
    assert ticked(c).kinds() == ["elect"]
    moved = cluster.get()
    assert moved.leader == r[1] and moved.isr == [r[1], r[2]]
    cluster.start(r[0])
    assert ticked(c).actions == []  # back, but not in the ISR: not caught up yet
    cluster.set_isr(moved, r)  # the leader adds it once it has caught up
    for _ in range(4):
        assert ticked(c).actions == []
    assert cluster.get().leader == r[1]


def test_restarted_broker_leaves_isrs_and_leaderships(cluster: ControllerWorld) -> None:
    p = cluster.topic()
    r = p.replicas
    c = cluster.controller(r[2])
    ticked(c)
    cluster.start(r[0])  # re-registered within its lease: a restart the lease never showed
    result = ticked(c)
    assert result.kinds() == ["elect"]
    now = cluster.get()
    assert (now.leader, now.isr, now.leader_epoch) == (r[1], [r[1], r[2]], 1)
    # A restarted follower is fenced out of the ISR, keeping the leader epoch.
    cluster.start(r[2])
    assert ticked(c).kinds() == ["isr_shrink"]
    assert cluster.get().isr == [r[1]] and cluster.get().leader_epoch == 1


def test_restarted_sole_isr_leader_is_reelected_with_a_new_epoch(cluster: ControllerWorld) -> None:
    p = cluster.topic(unclean_leader_election_enable=True)
    r = p.replicas
    p = cluster.set_isr(p, [r[0]])
    c = cluster.controller(r[1])
    ticked(c)
    cluster.start(r[0])
    assert ticked(c).kinds() == ["elect"]  # clean, not unclean: it is the only full copy
    now = cluster.get()
    assert (now.leader, now.isr, now.leader_epoch) == (r[0], [r[0]], 1)


def test_leader_outside_the_replicas_is_replaced(
    cluster: ControllerWorld, db_engine: Engine
) -> None:
    p = cluster.topic()
    r = p.replicas
    cluster.start(4)
    with db_engine.begin() as conn:  # a state the constraints forbid; simulate old data
        conn.execute(text("ALTER TABLE partitions DROP CONSTRAINT partitions_leader_in_isr"))
        conn.execute(text("ALTER TABLE partitions DROP CONSTRAINT partitions_isr_within_replicas"))
        conn.execute(text("UPDATE partitions SET leader = 4, isr = ARRAY[4] || isr"))
    c = cluster.controller(r[2])
    assert ticked(c).kinds() == ["elect"]
    now = cluster.get()
    assert (now.leader, now.isr, now.leader_epoch) == (r[0], r, 1)


def test_many_partitions_one_tick(cluster: ControllerWorld) -> None:
    cluster.topics.create("many", 30, 3)
    c = cluster.controller(1)
    cluster.kill(2)
    result = ticked(c)
    parts = cluster.topics.partitions("many")
    assert all(p.leader is not None and p.leader != 2 for p in parts)
    assert all(2 not in p.isr for p in parts)
    led_by_2 = sum(1 for a in result.actions if a.kind == "elect")
    assert led_by_2 == 10 and len(result.actions) == 30  # the rest: ISR shrinks
    assert {a.leader_epoch for a in result.actions if a.kind == "isr_shrink"} == {0}


def test_lost_race_is_retried_next_tick(
    cluster: ControllerWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = cluster.topic()
    r = p.replicas
    c = cluster.controller(r[2])
    cluster.kill(r[0])
    real = c.repo.elect_leader

    def racing(*args: object, **kwargs: object) -> PartitionRecord | None:
        # Someone else changes the partition between the controller's read and its write.
        cluster.repo.controller_alter_isr(p.tp, [r[0], r[1], r[2]], cluster.get().partition_epoch)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(c.repo, "elect_leader", racing)
    result = ticked(c)
    assert result.lost_races == 1 and result.actions == []
    monkeypatch.setattr(c.repo, "elect_leader", real)
    result = ticked(c)
    assert result.scanned and result.kinds() == ["elect"]
    assert cluster.get().leader == r[1]
