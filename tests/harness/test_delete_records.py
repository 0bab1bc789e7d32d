"""DeleteRecords (issue 30) on the in-process 3-broker cluster: the leader's log start moves,
each follower takes it from the leader's replica-fetch answers, and a follower that becomes
leader after the old one's kill -9 keeps it (records below it stay gone). Refusals as
Kafka's: beyond the high watermark, on a follower, on a compact-only topic; on a tiered topic
the start is kept in Postgres too."""

from __future__ import annotations

import pytest

from ingest.service.record_deletion import HIGH_WATERMARK, RecordDeletion
from logformat.errors import ErrorCode, TierlogError
from metadata.log_starts import LogStarts
from metadata.types import TopicIdPartition, TopicNamePartition
from tests.harness.cluster import InProcessCluster
from tests.harness.node import Node
from tests.integration.cluster import wait_for

HOT_ONLY = {"remote_storage_enable": "false"}


def _starts(c: InProcessCluster, topic: str) -> dict[int, int]:
    tp = TopicNamePartition(topic, 0)
    return {
        i: n.b.partitions[tp].log.log_start_offset
        for i, n in c.brokers.items()
        if n.running and tp in n.b.partitions
    }


def _first_segments(c: InProcessCluster, topic: str) -> dict[int, int]:
    tp = TopicNamePartition(topic, 0)
    return {
        i: n.b.partitions[tp].log.segments()[0].base_offset
        for i, n in c.brokers.items()
        if n.running and tp in n.b.partitions
    }


def _delete(node: Node, topic: str, offset: int) -> int:
    return node.run(RecordDeletion(node.b).delete_before(topic, 0, offset))


def _refused(node: Node, topic: str, offset: int) -> ErrorCode:
    with pytest.raises(TierlogError) as refused:
        _delete(node, topic, offset)
    return refused.value.code


def test_compact_only_topics_refuse_and_tiered_ones_keep_the_start(
    cluster: InProcessCluster,
) -> None:
    c = cluster
    c.create_topic("dr-compact", cleanup_policy="compact", **HOT_ONLY)
    c.produce("dr-compact", [{"key": "k", "value": "v"}])
    assert _refused(c.leader("dr-compact"), "dr-compact", 1) is ErrorCode.POLICY_VIOLATION
    assert set(_starts(c, "dr-compact").values()) == {0}

    c.create_topic("dr-tiered")  # remote.storage.enable is on by default
    c.produce("dr-tiered", [{"key": "k", "value": f"v{i}"} for i in range(3)])
    leader = c.leader("dr-tiered")
    assert _delete(leader, "dr-tiered", 2) == 2
    # Cross-tier: in Postgres, so it outlives this leader (cold reads and cold retention
    # read it there: tests/integration/test_delete_records_tiered.py).
    view = leader.b.cache.topic("dr-tiered")
    assert view is not None
    assert LogStarts(leader.b.engine).get(TopicIdPartition(view.info.id, 0)) == 2
    assert _delete(leader, "dr-tiered", 1) == 2  # never backwards
    c.advance(1)  # followers fetch: the answers carry the leader's log start
    assert _starts(c, "dr-tiered") == {1: 2, 2: 2, 3: 2}


def test_log_start_moves_on_every_replica_and_survives_failover(
    cluster: InProcessCluster,
) -> None:
    """Last in the file: the killed broker stays down for the module."""
    c = cluster
    c.create_topic("dr", min_insync_replicas=2, segment_bytes=1024, **HOT_ONLY)
    pad = "." * 600  # a segment per batch: [0,2) [2,4) [4,6) [6,8); 5 falls inside one
    for i in range(4):
        c.produce("dr", [{"value": f"v{2 * i}{pad}"}, {"value": f"v{2 * i + 1}{pad}"}])
    leader = c.leader("dr")
    assert _delete(leader, "dr", 5) == 5
    assert _delete(leader, "dr", 3) == 5  # never backwards
    c.advance(1)  # followers fetch: the answers carry the leader's log start
    assert _starts(c, "dr") == {1: 5, 2: 5, 3: 5}
    for node in c.brokers.values():  # each replica's retention drops what is wholly below
        node.run(node.b.retention.run_once())
    assert _first_segments(c, "dr") == {1: 4, 2: 4, 3: 4}

    assert _refused(leader, "dr", 9) is ErrorCode.OFFSET_OUT_OF_RANGE  # HW is 8
    assert _refused(leader, "dr", -2) is ErrorCode.OFFSET_OUT_OF_RANGE
    follower = next(n for i, n in c.brokers.items() if i != leader.broker_id)
    assert _refused(follower, "dr", 6) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _refused(leader, "no-such-topic", 0) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    old = leader.broker_id
    c.hold_lease(old)  # only the proof of its death ends it
    c.crash(old)
    new = wait_for(
        "a new leader",
        lambda: (ld := c.partition("dr", via=follower)["leader"]) not in (None, old) and ld,
        timeout=30,
    )
    survivor = c.brokers[new]
    # The survivor's own answer once it has taken the leadership the others already see.
    wait_for(
        "the new leader's log start",
        lambda: c.partition("dr", via=survivor)["log_start_offset"] is not None,
        timeout=30,
    )
    assert c.partition("dr", via=survivor)["log_start_offset"] == 5
    r = survivor.http.get("/topics/dr/partitions/0/records", params={"offset": 4})
    assert r.status_code == 416, r.text  # below the log start: gone
    r = survivor.http.get("/topics/dr/partitions/0/records", params={"offset": 5})
    assert [rec["value"].rstrip(".") for rec in r.json()["records"]] == ["v5", "v6", "v7"]
    # -1 is the high watermark: everything goes.
    assert _delete(survivor, "dr", HIGH_WATERMARK) == 8
