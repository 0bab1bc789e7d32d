"""The leader's own ISR upkeep, in process: followers that cannot fetch leave the ISR once
they lag more than replica.lag.time.max.ms on the manual clock, and rejoin once caught up."""

from __future__ import annotations

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
