"""ElectLeaders (issue 30) on the in-process 3-broker cluster, and the controller Metadata
names, which is where admin clients send it. A preferred election waits for the
preferred-leader mover (it moves on the manual clock, so the call is seen waiting) and times
out as Kafka's does; an unclean one of a partition whose only replica is down finds no
eligible leader; and once the controller's broker has stopped, Metadata names a broker it
lists as alive (librdkafka waits for a named controller it cannot reach until its request
times out: the hang of the real-process ElectLeaders test)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future

import pytest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from ingest.kafka.cluster_apis import handle_metadata
from ingest.kafka.context import KafkaContext
from ingest.replication.handover import resign
from ingest.service.leader_election import PREFERRED, UNCLEAN, LeaderElections
from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicIdPartition, TopicNamePartition
from tests.harness.cluster import STEP_S, InProcessCluster
from tests.harness.node import LEASE_MS, REPLICA_LAG_MS, Node
from tests.integration.cluster import wait_for

HOT_ONLY = {"remote_storage_enable": "false"}


def _elections(node: Node) -> LeaderElections:
    elections: LeaderElections = node.app.state.services.elections
    return elections


def _refusal(node: Node, kind: int, topic: str, partition: int, wait_s: float) -> ErrorCode:
    with pytest.raises(TierlogError) as refused:
        node.run(_elections(node).elect(kind, topic, partition, wait_s))
    return refused.value.code


def _leader_in_postgres(node: Node, topic: str) -> int | None:
    view = node.b.cache.topic(topic)
    assert view is not None
    state = node.b.partition_repo.get(TopicIdPartition(view.info.id, 0))
    assert state is not None
    return state.leader


def _metadata(node: Node) -> MetadataResponse:
    """Node's answer to a Metadata request, through the Kafka handler itself."""
    services = node.app.state.services
    ctx = KafkaContext(services, ("127.0.0.1", 19000 + node.broker_id))
    request = MetadataRequest(topics=None, include_topic_authorized_operations=False)
    return node.run(handle_metadata(ctx, request, MetadataResponse))


def test_a_preferred_election_waits_for_the_mover(cluster: InProcessCluster) -> None:
    c = cluster
    topic = "el-move"
    c.create_topic(topic, rf=3, **HOT_ONLY)
    c.produce(topic, [{"value": "v"}])
    leader = c.leader(topic)
    preferred = c.partition(topic)["replicas"][0]
    assert leader.broker_id == preferred
    tp = TopicNamePartition(topic, 0)
    # Leadership handed to another in-sync replica (a controlled shutdown's hand-over); the
    # preferred replica rejoins the ISR, and the mover waits for the manual clock to move.
    moved = leader.run(resign(leader.b.partition_repo, preferred, leader.b.partitions[tp], 10))
    assert moved is not None and moved.leader != preferred

    def back_in_sync() -> bool:
        now = c.partition(topic)
        return bool(now["leader"] == moved.leader and preferred in now["isr"])

    wait_for("the preferred replica back in sync", back_in_sync)
    interim = c.brokers[moved.leader]
    asking = c.any(exclude=moved.leader)

    # Not moved within the request's timeout: Kafka's REQUEST_TIMED_OUT.
    assert _refusal(asking, PREFERRED, topic, 0, 0.2) is ErrorCode.REQUEST_TIMED_OUT
    call: Future[None] = asyncio.run_coroutine_threadsafe(
        _elections(asking).elect(PREFERRED, topic, 0, 60), asking.loop.loop
    )
    wait_for("the mover waiting out its delay", lambda: tp in interim.b.preferred._in_sync_since)
    assert not call.done()  # waiting, not answered: the move has not happened
    for _ in range(200):
        if call.done():
            break
        c.advance(STEP_S)
    assert call.result(30) is None  # elected
    assert _leader_in_postgres(asking, topic) == preferred  # when it answered, not later
    # Now it leads: nothing to elect.
    assert _refusal(asking, PREFERRED, topic, 0, 5) is ErrorCode.ELECTION_NOT_NEEDED


def _advance_until(c: InProcessCluster, what: str, check: Callable[[], bool]) -> None:
    """Move the manual clock on, a step at a time, until `check()`: bounded in real time
    (a loaded machine answers late), never by clock steps, which only give more chances."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if check():
                return
        except (AssertionError, KeyError):  # a describe refused mid-change: look again
            pass
        assert time.monotonic() < deadline, f"{what}: not within 60 s"
        c.advance(STEP_S)


def test_unclean_election_only_when_enabled(cluster: InProcessCluster) -> None:
    """unclean.leader.election.enable: a partition whose only in-sync replica is down stays
    offline while a live out-of-sync replica waits (produce refused), however long; once the
    topic enables it, the controller elects that replica and logs the unclean election.
    (Moved from tests/integration/test_replication.py, where it waited a fixed 3 s of real
    time for the election that must not happen and restarted two broker processes.)"""
    c = cluster
    topic = "unclean"
    c.create_topic(topic, rf=2, min_insync_replicas=1, **HOT_ONLY)
    info = c.partition(topic)
    leader = c.brokers[info["leader"]]
    follower = c.brokers[next(r for r in info["replicas"] if r != leader.broker_id)]
    follower.stop()
    try:
        _advance_until(
            c, "ISR without the follower", lambda: c.partition(topic)["isr"] == [leader.broker_id]
        )
        c.produce(topic, [{"value": "only on the leader"}], via=leader.broker_id)
        leader.stop()
        follower.start()
        _advance_until(c, "the partition offline", lambda: c.partition(topic)["leader"] is None)
        c.advance(LEASE_MS / 1000 + REPLICA_LAG_MS / 1000)  # the controller's every chance
        assert c.partition(topic)["leader"] is None  # offline rather than an out-of-sync one
        r = follower.http.post(
            f"/topics/{topic}/records", json={"records": [{"value": "x", "partition": 0}]}
        )
        assert r.status_code == 503, r.text
        assert r.json()["error_code"] in ("LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER")
        r = follower.http.patch(
            f"/topics/{topic}/configs", json={"configs": {"unclean.leader.election.enable": True}}
        )
        assert r.status_code == 200, r.text
        _advance_until(
            c,
            "the unclean election",
            lambda: c.partition(topic)["leader"] == follower.broker_id,
        )
        assert any("unclean leader election" in c.logs.text(i) for i in c.brokers)
    finally:
        for node in (leader, follower):
            if not node.running:
                node.start()


def test_metadata_names_a_live_controller_and_unclean_finds_no_leader(
    cluster: InProcessCluster,
) -> None:
    """Last in the file: it stops the controller's broker (and starts it again)."""
    c = cluster
    topic = "el-down"
    c.create_topic(topic, partitions=6, rf=1, **HOT_ONLY)
    lease = c.any().b.controller_lease
    holder = wait_for("a controller", lambda: lease.holder()[0])
    asking = c.any(exclude=holder)
    answer = _metadata(asking)
    assert answer.controller_id == holder  # the lease holder, while it lives
    [partition] = [
        p["partition"] for p in c.describe(topic)["partitions"] if p["replicas"] == [holder]
    ][:1]

    c.brokers[holder].stop()  # a clean stop: it resigns the lease and deregisters
    try:
        wait_for("the stopped broker listed dead", lambda: not _listed(asking, holder))
        answer = _metadata(asking)
        listed = [b.node_id for b in answer.brokers]
        assert holder not in listed
        assert answer.controller_id in listed  # never a broker the client cannot reach

        wait_for("its partition offline", lambda: c.partition(topic, partition)["leader"] is None)
        unclean = _refusal(asking, UNCLEAN, topic, partition, 5)
        assert unclean is ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        preferred = _refusal(asking, PREFERRED, topic, partition, 5)
        assert preferred is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # at once, no waiting
    finally:
        c.brokers[holder].start()


def _listed(node: Node, broker_id: int) -> bool:
    return broker_id in {b.node_id for b in _metadata(node).brokers}


def test_a_new_partition_s_leader_takes_a_forwarded_write_before_notify_tells_it(
    cluster: InProcessCluster,
) -> None:
    """Created through one broker, produced through another at once: the leader may not have
    heard (NOTIFY, the refresh interval) that it leads. It reads the metadata itself and takes
    the write, rather than refusing with NOT_LEADER_OR_FOLLOWER (an HTTP client's produce right
    after its create failed so, now and then, in a real-process test)."""
    c = cluster
    deaf = c.brokers[1]
    follower = deaf.b.metadata
    on_refresh = follower._on_refresh
    follower._on_refresh = lambda: None  # its cache moves on, its replicas do not
    try:
        via = c.brokers[2]
        r = via.http.post(
            "/topics",
            json={
                "name": "fw-new",
                "partitions": 3,
                "replication_factor": 1,
                "configs": {"remote.storage.enable": "false"},
            },
        )
        assert r.status_code == 201, r.text
        led = {p["leader"]: p["partition"] for p in c.describe("fw-new", via)["partitions"]}
        assert TopicNamePartition("fw-new", led[1]) not in deaf.b.partitions
        r = via.http.post(
            "/topics/fw-new/records",
            params={"acks": "all"},
            json={"records": [{"value": "first", "partition": led[1]}]},
        )
        assert r.status_code == 200, r.text
        assert r.json()["offsets"] == [{"partition": led[1], "offset": 0}]
    finally:
        follower._on_refresh = on_refresh
