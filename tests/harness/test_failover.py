"""Failover faster than the lease (ingest/replication/death_signal.py), on the manual clock:
a leader whose process is gone (its port refuses, its connections reset) is replaced while
time stands still; a leader cut off by the network (its packets dropped: timeouts) keeps its
leadership until its lease lapses, as before, and is fenced by it."""

from __future__ import annotations

import time
from typing import Any

from tests.harness.cluster import InProcessCluster
from tests.harness.node import LEASE_MS
from tests.integration.cluster import wait_for

LEASE_S = LEASE_MS / 1000
# Real seconds the death signal gets: far more than it needs (one NOTIFY, a refused connect,
# a few queries), far less than the lease the test holds for the dead broker.
DETECT_S = 20


def _leader(c: InProcessCluster, topic: str, via: int) -> int | None:
    leader = c.partition(topic, via=c.brokers[via])["leader"]
    return None if leader is None else int(leader)


def _brokers(c: InProcessCluster) -> list[dict[str, Any]]:
    return list(c.any().http.get("/brokers").json()["brokers"])


def test_a_leader_cut_off_by_the_network_keeps_leading_until_its_lease_lapses(
    cluster: InProcessCluster,
) -> None:
    """Timeouts prove nothing (a paused or partitioned leader still holds its port): no
    broker may end its lease, so no second leader is elected while it may still write."""
    c = cluster
    c.create_topic("cut", min_insync_replicas=2)
    c.produce("cut", [{"value": "a"}])
    old = c.leader("cut").broker_id
    other = next(i for i in c.brokers if i != old)
    c.isolate(old)
    c.hold_lease(old, seconds=60)  # real time must not end it while we watch
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # the followers' fetches fail all along
        assert _leader(c, "cut", other) == old
        time.sleep(0.1)
    assert c.brokers[old].b.leader_state("cut", 0) is not None  # it still leads, by its lease
    c.advance(LEASE_S)  # its lease lapses by its own clock: it stops, and may be replaced
    assert c.brokers[old].b.leader_state("cut", 0) is None
    c.hold_lease(old, seconds=0)  # ... and by the database's
    wait_for("a new leader", lambda: _leader(c, "cut", other) not in (None, old), timeout=30)


def test_a_leader_refusing_connections_while_it_lives_keeps_its_lease(
    cluster: InProcessCluster,
) -> None:
    """A broker shutting down closes its port before it has handed its partitions over: a
    refusal alone is no proof of death while the process still holds its Postgres session."""
    c = cluster
    wait_for("every broker back", lambda: all(b["alive"] for b in _brokers(c)), timeout=30)
    c.create_topic("closing", min_insync_replicas=2)
    c.produce("closing", [{"value": "a"}])
    old = c.leader("closing").broker_id
    other = next(i for i in c.brokers if i != old)
    # Its session back first (a test before may have cut it from Postgres): a refused port
    # with no session is a dead broker, rightly, and that is not this test's case.
    wait_for("its Postgres session", lambda: c.holds_session(old), timeout=30)
    c.hold_lease(old)
    c.close_port(old)
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # its followers are refused all along
            assert _leader(c, "closing", other) == old
            time.sleep(0.1)
        assert {b["id"]: b["alive"] for b in _brokers(c)}[old] is True
    finally:
        c.close_port(old, closed=False)


def test_a_crashed_leader_is_replaced_before_its_lease_lapses(cluster: InProcessCluster) -> None:
    """kill -9 of the leader: its followers' connections are reset and refused, the
    controller finds nothing listening and ends the lease; a new leader takes writes
    while the dead broker's lease, by every clock, still runs."""
    c = cluster
    wait_for("every broker back", lambda: all(b["alive"] for b in _brokers(c)), timeout=30)
    c.create_topic("crash", min_insync_replicas=2)
    c.produce("crash", [{"value": "a"}, {"value": "b"}])
    old = c.leader("crash").broker_id
    other = next(i for i in c.brokers if i != old)
    c.hold_lease(old)  # an hour: only a proof of death can end it within the test
    c.crash(old)
    new = wait_for(
        "a new leader while the dead one's lease runs",
        lambda: (ld := _leader(c, "crash", other)) not in (None, old) and ld,
        timeout=DETECT_S,
    )
    assert {b["id"]: b["alive"] for b in _brokers(c)}[old] is False
    offsets = c.produce("crash", [{"value": "c"}], via=new)
    assert offsets[0]["offset"] == 2
    assert [r["value"] for r in c.brokers[new].fetch_all("crash")] == ["a", "b", "c"]
