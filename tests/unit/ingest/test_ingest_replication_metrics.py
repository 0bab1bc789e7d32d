"""Per-node replication metrics: two brokers in one process, each on its own registry, keep
their own gauges (a module-level gauge would hold whichever broker wrote last)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from ingest.metrics import ReplicationMetrics


def test_two_brokers_keep_their_own_gauges() -> None:
    one, two = CollectorRegistry(), CollectorRegistry()
    m1, m2 = ReplicationMetrics(one), ReplicationMetrics(two)
    m1.publish_offsets("t", 0, leo=10, hw=8, start=0)
    m2.publish_offsets("t", 0, leo=10, hw=5, start=0)  # a follower behind the leader
    m1.offline_replicas.set_function(lambda: 0)
    m2.offline_replicas.set_function(lambda: 1)
    assert one.get_sample_value("tierlog_high_watermark", {"topic": "t", "partition": "0"}) == 8
    assert two.get_sample_value("tierlog_high_watermark", {"topic": "t", "partition": "0"}) == 5
    assert one.get_sample_value("tierlog_offline_replicas") == 0
    assert two.get_sample_value("tierlog_offline_replicas") == 1
    m2.forget_partition("t", 0)
    assert two.get_sample_value("tierlog_high_watermark", {"topic": "t", "partition": "0"}) is None
    assert one.get_sample_value("tierlog_high_watermark", {"topic": "t", "partition": "0"}) == 8


def test_names_labels_and_help_are_the_dashboards() -> None:
    text = generate_latest(ReplicationMetrics(CollectorRegistry()).registry).decode()
    for name in (
        "tierlog_log_end_offset",
        "tierlog_high_watermark",
        "tierlog_log_start_offset",
        "tierlog_partitions_led",
        "tierlog_offline_replicas",
        "tierlog_corrupt_frame_reads_total",
        "tierlog_corrupt_frame_repairs_total",
        "tierlog_corrupt_frames_replaced_total",
        "tierlog_corrupt_committed_frames_total",
        "tierlog_under_replicated_partitions",
        "tierlog_under_min_isr_partitions",
        "tierlog_isr_shrinks",
        "tierlog_isr_expands",
        "tierlog_offline_partitions_count",
        "tierlog_active_controller_count",
        "tierlog_leader_elections",
        "tierlog_unclean_leader_elections",
    ):
        assert f"# HELP {name}" in text, name
    assert "(kafka.server:ReplicaManager IsrShrinksPerSec)" in text
