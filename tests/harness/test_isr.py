"""The leader's own ISR upkeep, in process: followers that cannot fetch leave the ISR once
they lag more than replica.lag.time.max.ms on the manual clock, and rejoin once caught up."""

from __future__ import annotations

from typing import Any

import pytest

from metadata.partition_state import PartitionStateRepo
from metadata.types import TopicNamePartition
from tests.harness.cluster import InProcessCluster
from tests.harness.node import REPLICA_LAG_MS
from tests.integration.cluster import wait_for


def test_leader_drops_followers_that_stop_fetching_then_takes_them_back(
    cluster: InProcessCluster,
) -> None:
    """replica.lag.time.max.ms: followers alive (their leases current) but unable to fetch
    leave the ISR by the *leader's* decision, and rejoin once they catch up."""
    c = cluster
    c.create_topic("lag", min_insync_replicas=1)
    leader = c.leader("lag")
    for i in c.brokers:
        if i != leader.broker_id:
            c.cut(i, leader.broker_id)  # followers' fetches fail; heartbeats go on
    c.advance(REPLICA_LAG_MS / 1000 + 1)
    wait_for(
        "the leader alone in the ISR",
        lambda: c.partition("lag")["isr"] == [leader.broker_id],
        timeout=30,
    )
    assert all(b["alive"] for b in leader.http.get("/brokers").json()["brokers"])
    assert "ISR changed" in c.logs.text(leader.broker_id)
    c.produce("lag", [{"value": f"v{i}"} for i in range(5)], via=leader.broker_id)
    c.heal()
    wait_for("the ISR whole again", lambda: len(c.partition("lag")["isr"]) == 3, timeout=30)
    assert c.partition("lag")["leader"] == leader.broker_id  # no election: the leader's call
    for b in c.brokers.values():
        wait_for(
            f"broker {b.broker_id} caught up",
            lambda b=b: b.segment_bytes("lag") == leader.segment_bytes("lag"),
        )


def test_isr_shrinks_and_expands(cluster: InProcessCluster) -> None:
    c = cluster
    c.create_topic("isr", min_insync_replicas=1)
    leader = c.leader("isr")
    follower = next(b for b in c.brokers.values() if b.broker_id != leader.broker_id)
    c.isolate(follower.broker_id)  # as if stopped: no fetches, no heartbeats
    c.advance(REPLICA_LAG_MS / 1000 + 1)
    # A stopped follower leaves the ISR (lease expiry or replica lag); acks=all still works.
    wait_for(
        "ISR shrink",
        lambda: follower.broker_id not in c.partition("isr")["isr"],
        timeout=20,
    )
    c.produce("isr", [{"value": f"x{i}"} for i in range(20)])
    c.heal()
    wait_for("ISR expand", lambda: follower.broker_id in c.partition("isr")["isr"], timeout=30)
    wait_for(
        "follower caught up",
        lambda: follower.segment_bytes("isr") == leader.segment_bytes("isr"),
    )


def test_min_insync_replicas_is_enforced(cluster: InProcessCluster) -> None:
    """min.insync.replicas=2 with the leader alone in the ISR: acks=all is refused with
    NOT_ENOUGH_REPLICAS (503) and appends nothing, acks=1 still appends; with the followers
    back in the ISR acks=all appends again. (Moved from tests/integration/test_replication.py,
    where killing and restarting two broker processes showed nothing more.)"""
    c = cluster
    c.create_topic("strict", min_insync_replicas=2)
    leader = c.leader("strict")
    for i in c.brokers:
        if i != leader.broker_id:
            c.cut(i, leader.broker_id)  # followers' fetches fail: the leader drops them
    c.advance(REPLICA_LAG_MS / 1000 + 1)
    wait_for(
        "ISR of one",
        lambda: c.partition("strict", via=leader)["isr"] == [leader.broker_id],
        timeout=30,
    )

    def produce(value: str, acks: str) -> Any:
        return leader.http.post(
            "/topics/strict/records",
            params={"acks": acks},
            json={"records": [{"value": value, "partition": 0}]},
        )

    r = produce("nope", "all")
    assert r.status_code == 503 and r.json()["error_code"] == "NOT_ENOUGH_REPLICAS", r.text
    r = produce("fine", "1")
    assert r.status_code == 200 and r.json()["offsets"][0]["offset"] == 0, r.text
    c.heal()
    wait_for("ISR restored", lambda: len(c.partition("strict")["isr"]) == 3, timeout=30)
    assert [o["offset"] for o in c.produce("strict", [{"value": "again"}])] == [1]


def test_isr_change_whose_answer_is_lost_holds_the_high_watermark(
    cluster: InProcessCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ISR expansion that Postgres commits but whose answer the leader never gets (its
    connection cut right after the commit) must leave the leader on the maximal ISR: the
    member just added is electable, so nothing it lacks may count as committed. Then the
    leader reads the ISR back once Postgres is reachable again (chaos `partition-postgres`
    found the high watermark past an electable replica's log)."""
    c = cluster
    c.create_topic("lost-answer", min_insync_replicas=1)
    leader = c.leader("lost-answer")
    lid = leader.broker_id
    f1, f2 = (i for i in c.brokers if i != lid)
    key = TopicNamePartition("lost-answer", 0)
    state = leader.b.partitions[key]
    repo = PartitionStateRepo(c._engine)  # the harness's own connection, never cut

    def isr_in_postgres() -> list[int]:
        info = repo.get(state.tp)
        assert info is not None
        return list(info.isr)

    c.cut(f2, lid)
    c.advance(REPLICA_LAG_MS / 1000 + 1)
    wait_for("f2 out of the ISR", lambda: f2 not in isr_in_postgres(), timeout=30)

    replicas = leader.b.replicas
    assert replicas is not None
    real = replicas.repo.alter_isr

    def committed_then_cut(tp: Any, *args: Any, **kwargs: Any) -> Any:
        info = real(tp, *args, **kwargs)
        if tp != state.tp or info is None:  # another partition of this leader's (the earlier
            return info  # tests' topics), or a race lost: nothing of ours committed
        c.cut_postgres(lid)
        raise OSError("connection reset by peer after the commit")

    monkeypatch.setattr(replicas.repo, "alter_isr", committed_then_cut)
    c.links.restore(f2, lid)  # f2 catches up and the leader adds it back
    wait_for("f2 in the ISR in Postgres", lambda: f2 in isr_in_postgres(), timeout=30)
    monkeypatch.undo()
    c.cut(f2, lid)  # f2 stops fetching again; the leader and f1 go on
    offsets = leader.http.post(
        "/topics/lost-answer/records",
        params={"acks": "1"},
        json={"records": [{"value": f"v{i}", "partition": 0} for i in range(5)]},
    )
    assert offsets.status_code == 200, offsets.text
    c.advance(1)  # f1 fetches everything
    f1_state = c.brokers[f1].b.partitions[key]
    wait_for(
        "f1 caught up", lambda: f1_state.log.log_end_offset == state.log.log_end_offset, timeout=30
    )
    f2_end = c.brokers[f2].b.partitions[key].log.log_end_offset
    assert f2_end < state.log.log_end_offset
    assert state.high_watermark <= f2_end, "committed past an electable replica's log"
    c.heal()  # Postgres back: the leader learns the ISR it could not hear
    wait_for(
        "the leader's ISR read back",
        lambda: not state.isr_change_pending and state.isr == isr_in_postgres(),
        timeout=30,
    )
    assert f2 in state.isr
    wait_for("f2 caught up", lambda: state.high_watermark == state.log.log_end_offset, timeout=30)


def test_sigterm_hands_leadership_over_before_the_broker_stops(
    cluster: InProcessCluster,
) -> None:
    """Kafka's controlled shutdown: on SIGTERM (Broker.begin_drain, as the server calls it)
    a leader hands each partition to an in-sync follower that holds all it wrote, and leaves
    the ISR, while it still runs: writes go on through the new leader at once instead of
    waiting for it to stop (a rolling restart's latency)."""
    c = cluster
    c.create_topic("drain", min_insync_replicas=2)
    c.produce("drain", [{"value": f"v{i}"} for i in range(5)])
    leader = c.leader("drain")
    lid = leader.broker_id
    repo = PartitionStateRepo(c._engine)
    state = leader.b.partitions[TopicNamePartition("drain", 0)]
    end = state.log.log_end_offset
    try:
        leader.loop.run(_drain(leader))
        info = wait_for(
            "leadership moved",
            lambda: (i := repo.get(state.tp)) is not None and i.leader != lid and i,
            timeout=30,
        )
        assert lid not in info.isr and len(info.isr) == 2, info
        assert leader.running  # moved before the broker stopped, not by its lease ending
        new = c.brokers[info.leader]
        assert new.b.partitions[TopicNamePartition("drain", 0)].log.log_end_offset == end
        c.produce("drain", [{"value": "after"}], via=info.leader)  # acks=all with two
    finally:  # back in service (a harness node cannot be restarted: its metrics registry)
        leader.b.draining = leader.b.lease.left = False
        leader.run(leader.b.lease.heartbeat())  # registers again
    wait_for("the ISR whole again", lambda: len(c.partition("drain")["isr"]) == 3, timeout=60)


async def _drain(node: Any) -> None:
    node.b.begin_drain()
