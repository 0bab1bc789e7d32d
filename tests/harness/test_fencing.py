"""Fencing in process: an isolated leader whose lease lapses on the manual clock refuses
writes, a new leader is elected in a new epoch, and the old leader's divergent tail is
truncated when it follows again (KIP-101/279)."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.service.services import Services
from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicNamePartition
from tests.harness.cluster import InProcessCluster
from tests.harness.node import KAFKA_PORT_BASE, LEASE_MS, Node
from tests.integration.cluster import wait_for

LEASE_S = LEASE_MS / 1000


def _partition(c: InProcessCluster, topic: str, via: int) -> dict[str, Any]:
    return c.partition(topic, via=c.brokers[via])


def _caught_up(c: InProcessCluster, topic: str, leader: Node) -> None:
    for b in c.brokers.values():
        wait_for(
            "replicas caught up",
            lambda b=b: b.segment_bytes(topic) == leader.segment_bytes(topic),
        )


def test_isolated_leader_cannot_acknowledge_and_its_tail_is_truncated(
    cluster: InProcessCluster,
) -> None:
    """The old leader is cut off from Postgres and from its followers, never paused: it keeps
    answering. Within its lease it takes an acks=1 write no one else has; once replaced, it
    refuses writes outright (it cannot learn of the new leader, so it cannot forward); when
    the links return it follows the new leader and its divergent tail is gone."""
    c = cluster
    c.create_topic("fence", min_insync_replicas=2)
    c.produce("fence", [{"value": "a"}, {"value": "b"}])
    old = c.leader("fence")
    _caught_up(c, "fence", old)
    other = next(i for i in c.brokers if i != old.broker_id)
    c.isolate(old.broker_id)
    r = old.http.post(
        "/topics/fence/records",
        params={"acks": "1"},
        json={"records": [{"value": "only-on-the-old-leader", "partition": 0}]},
    )
    assert r.status_code == 200, r.text  # its lease still runs: acks=1 may be lost later
    c.advance(LEASE_S)  # its lease lapses, by its own clock and by the database's
    new = wait_for(
        "a new leader",
        lambda: (ld := _partition(c, "fence", other)["leader"]) not in (None, old.broker_id) and ld,
        timeout=30,
    )
    for acks in ("all", "1"):
        r = old.http.post(
            "/topics/fence/records",
            params={"acks": acks},
            json={"records": [{"value": f"zombie-acks-{acks}", "partition": 0}]},
        )
        assert r.status_code != 200, r.text
        # It cannot know it was replaced: the retriable refusal of a lease in doubt.
        assert r.json()["error_code"] == "NOT_ENOUGH_REPLICAS", r.text
    c.produce("fence", [{"value": "c"}], via=new)
    c.heal()
    wait_for(
        "old leader truncated and following",
        lambda: old.segment_bytes("fence") == c.brokers[new].segment_bytes("fence"),
        timeout=40,
    )
    values = [r["value"] for r in c.brokers[new].fetch_all("fence")]
    assert values == ["a", "b", "c"]
    wait_for("lapse logged", lambda: "broker lease lapsed" in c.logs.text(old.broker_id))


def test_divergent_tail_of_old_leader_is_truncated(cluster: InProcessCluster) -> None:
    c = cluster
    c.create_topic("diverge", min_insync_replicas=1)
    c.produce("diverge", [{"value": "common-1"}, {"value": "common-2"}])
    old = c.leader("diverge")
    followers = [b for b in c.brokers.values() if b.broker_id != old.broker_id]
    _caught_up(c, "diverge", old)
    # Cut the followers off the leader (a cut loses the answers of fetches in flight), write
    # on the leader alone (acks=1), then cut it off Postgres too: its last frame now exists
    # nowhere else. All of this within its lease: the clock has not moved.
    for f in followers:
        c.cut(f.broker_id, old.broker_id)
    r = old.http.post(
        "/topics/diverge/records",
        params={"acks": "1"},
        json={"records": [{"value": "only-on-old-leader", "partition": 0}]},
    )
    assert r.status_code == 200, r.text
    c.isolate(old.broker_id)
    c.advance(LEASE_S)
    new = wait_for(
        "a new leader",
        lambda: (ld := c.partition("diverge")["leader"]) not in (None, old.broker_id) and ld,
        timeout=20,
    )
    c.produce("diverge", [{"value": "new-epoch-1"}])
    c.heal()
    wait_for(
        "old leader truncated and following",
        lambda: old.segment_bytes("diverge") == c.brokers[new].segment_bytes("diverge"),
        timeout=30,
    )
    values = [r["value"] for r in c.any().fetch_all("diverge")]
    assert values == ["common-1", "common-2", "new-epoch-1"]
    assert "truncated divergent tail" in c.logs.text(old.broker_id)


def test_leader_cut_off_from_postgres_stops_serving_and_rejoins_as_follower(
    cluster: InProcessCluster,
) -> None:
    """A leader that loses only Postgres (its peers and clients still reach it) is replaced
    once its lease lapses. From then on it must not answer as the leader: a read past its
    own log end is NOT_LEADER_OR_FOLLOWER (retriable), never 416 OFFSET_OUT_OF_RANGE, which
    sends a consumer that already read those offsets from the new leader back to a reset
    (chaos `partition-postgres`). When Postgres is back, its first heartbeat re-registers
    it, and its lease counts as live only once it has read that it now follows."""
    c = cluster
    c.create_topic("cut-pg", min_insync_replicas=1)
    c.produce("cut-pg", [{"value": "a"}, {"value": "b"}])
    old = c.leader("cut-pg")
    _caught_up(c, "cut-pg", old)
    c.cut_postgres(old.broker_id)
    c.advance(LEASE_S)
    other = next(i for i in c.brokers if i != old.broker_id)
    new = wait_for(
        "a new leader",
        lambda: (
            (ld := _partition(c, "cut-pg", other)["leader"]) not in (None, old.broker_id) and ld
        ),
        timeout=30,
    )
    c.produce("cut-pg", [{"value": f"new-{i}"} for i in range(3)], via=new)
    r = old.http.get("/topics/cut-pg/partitions/0/records", params={"offset": "4"})
    assert r.status_code == 503, r.text
    assert r.json()["error_code"] == "NOT_LEADER_OR_FOLLOWER", r.text
    c.heal()
    old.run(old.b.lease.heartbeat())  # lapsed in Postgres: registers again, reads the metadata
    assert old.b.lease_ok()
    assert old.b.leader_state("cut-pg", 0) is None, "its lease live while it thinks it leads"
    assert old.b.partitions[TopicNamePartition("cut-pg", 0)].leader_id == new
    wait_for(
        "old leader following",
        lambda: old.segment_bytes("cut-pg") == c.brokers[new].segment_bytes("cut-pg"),
        timeout=30,
    )


def test_leader_whose_lease_is_in_doubt_refuses_writes_without_not_leader(
    cluster: InProcessCluster,
) -> None:
    """Its own lease lapsed (0.8 of it, by its clock) but nobody replaced it: a write gets the
    retriable NOT_ENOUGH_REPLICAS, not NOT_LEADER_OR_FOLLOWER, for its leader epoch has not
    moved and librdkafka ignores metadata whose epoch is not newer: told "not leader", its
    producer stayed parked until every queued record timed out (chaos, seed 4247227297).
    Reads are fenced with NOT_LEADER_OR_FOLLOWER, as a replaced leader's are."""
    c = cluster
    c.create_topic("doubt", min_insync_replicas=1)
    c.produce("doubt", [{"value": "a"}])
    leader = c.leader("doubt")
    c.cut_postgres(leader.broker_id)
    c.advance(LEASE_S * 0.8 + 0.6)  # past its own view of the lease, within the database's
    assert not leader.b.lease_ok()
    with pytest.raises(TierlogError) as write:
        leader.b.require_leader("doubt", 0, write=True)
    assert write.value.code is ErrorCode.NOT_ENOUGH_REPLICAS, write.value
    with pytest.raises(TierlogError) as read:
        leader.b.require_leader("doubt", 0)
    assert read.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER, read.value


def test_a_broker_registered_again_keeps_its_kafka_address(cluster: InProcessCluster) -> None:
    """A broker whose lease lapsed (paused, or cut off from Postgres) registers again on its
    next heartbeat, and that row must still name its Kafka listener: other brokers' Metadata
    answers take a broker's Kafka address from it. Without it they named the broker's HTTP
    port shifted by their own offset, so librdkafka met HTTP ("Invalid response size") or a
    closed port and timed out the records of the partitions it led (chaos, seed 3255133382)."""
    c = cluster
    lapsed = c.brokers[3]
    c.cut_postgres(lapsed.broker_id)
    c.advance(LEASE_S)  # its lease lapses in Postgres
    c.heal()
    # Lapsed for certain: on a loaded machine its own heartbeat task, in real time, could
    # still renew it around the heal (one run in ~8 under load saw the lease alive).
    c.hold_lease(lapsed.broker_id, -1)
    lapsed.run(lapsed.b.lease.heartbeat())  # the heartbeat finds it lapsed: registers again
    # Its own heartbeat task may have got there first and logs once its registration returns,
    # which can be just after ours saw the new row alive.
    wait_for(
        "broker 3 registered again",
        lambda: "broker lease lapsed: registered again" in c.logs.text(lapsed.broker_id),
    )
    other = c.brokers[1]
    other.run(other.b.metadata.refresh_now())
    address = other.b.cache.broker_kafka_address(lapsed.broker_id)
    assert address == f"127.0.0.1:{KAFKA_PORT_BASE + lapsed.broker_id}"


def test_metadata_names_the_cluster_id_while_postgres_is_away(cluster: InProcessCluster) -> None:
    """Kafka's Metadata answer carries the cluster id, and never fails for it. A broker that
    read it lazily, on its first Kafka Metadata request, met Postgres away (killed and
    restarting) and closed the client's connection instead (30-minute soak, seed 2911). It
    is read as the broker starts."""
    c = cluster
    node = c.brokers[2]
    expected = c.brokers[1].b.partition_repo.cluster_id()
    c.cut_postgres(node.broker_id)
    try:
        assert node.run(Services.of(node.b).identity.cluster_id()) == expected
    finally:
        c.heal()
