"""Prometheus metrics of a broker's partitions and duties (the HTTP layer's are in
cluster/metrics.py).

The replication path's metrics are per node (`ReplicationMetrics`, one per broker, on the
registry the broker is given: Redpanda's probe objects), so that several brokers in one
process (tests/harness/) each keep their own gauges. A broker process passes the default
registry, so its /metrics is what it always was. The rest are still module-level, on the
default registry: one process hosts one broker."""

from __future__ import annotations

import contextlib

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

PRODUCED_RECORDS = Counter("tierlog_produce_records_total", "Records appended", ["topic"])
PRODUCED_BYTES = Counter("tierlog_produce_bytes_total", "Frame bytes appended", ["topic"])
FETCHED_RECORDS = Counter("tierlog_fetch_records_total", "Records served to consumers", ["topic"])
GROUP_COMMIT_FRAMES = Histogram(
    "tierlog_group_commit_frames",
    "Frames written per coalesced log write",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)


# Tiering, broker side (ingest/tiered: segment_registrar, local_retention, tiering_gauges).
TIERING_LAG = Gauge(
    "tierlog_partition_tiering_lag_records",
    "Committed records of a partition this broker leads not yet in the cold tier (leader view)",
    ["topic", "partition"],
)
HOT_BYTES = Gauge(
    "tierlog_hot_bytes", "Bytes of a partition's segments on this broker", ["topic", "partition"]
)
SEGMENTS_REGISTERED = Counter(
    "tierlog_segments_registered_total", "Sealed segments registered for tiering", ["topic"]
)
LOCAL_RETENTION_DELETED_SEGMENTS = Counter(
    "tierlog_local_retention_deleted_segments_total",
    "Tiered hot segments deleted by local retention",
    ["topic"],
)
LOCAL_RETENTION_DELETED_BYTES = Counter(
    "tierlog_local_retention_deleted_bytes_total",
    "Bytes of tiered hot segments deleted by local retention",
    ["topic"],
)
# Kafka's RemoteCopyLagBytes / RemoteCopyLagSegments (KIP-963), per hosted replica, plus
# the age of the oldest sealed segment still waiting (tiering lag in seconds).
REMOTE_COPY_LAG_BYTES = Gauge(
    "tierlog_remote_copy_lag_bytes",
    "Bytes of a partition's sealed segments on this broker not yet in the cold tier",
    ["topic", "partition"],
)
REMOTE_COPY_LAG_SEGMENTS = Gauge(
    "tierlog_remote_copy_lag_segments",
    "Sealed segments of a partition on this broker not yet in the cold tier",
    ["topic", "partition"],
)
REMOTE_COPY_LAG_SECONDS = Gauge(
    "tierlog_remote_copy_lag_seconds",
    "Age of the oldest sealed segment of a partition on this broker not yet in the cold tier",
    ["topic", "partition"],
)
UNTIERED_BYTES = Gauge(
    "tierlog_untiered_bytes",
    "Sealed bytes on this broker not yet in the cold tier (all hosted replicas)",
)
UNTIERED_BYTES_LIMIT = Gauge(
    "tierlog_untiered_bytes_limit",
    "Untiered bytes above which client produce gets 503 (--max-untiered-bytes; 0: none)",
)
LOCAL_RETENTION_BLOCKED_BYTES = Gauge(
    "tierlog_local_retention_blocked_bytes",
    "Hot bytes local retention would delete but keeps because they are not tiered yet",
    ["topic", "partition"],
)

# Log cleaner: key compaction of the hot tier's sealed segments (log_cleaner.py).
CLEANER_PASSES = Counter(
    "tierlog_log_cleaner_passes_total", "Log cleaner passes that rewrote segments", ["topic"]
)
CLEANER_SEGMENTS = Counter(
    "tierlog_log_cleaner_segments_cleaned_total",
    "Sealed segments recopied by the cleaner",
    ["topic"],
)
CLEANER_BYTES_READ = Counter(
    "tierlog_log_cleaner_bytes_read_total", "Segment bytes the cleaner recopied", ["topic"]
)
CLEANER_BYTES_RECLAIMED = Counter(
    "tierlog_log_cleaner_bytes_reclaimed_total", "Disk bytes the cleaner freed", ["topic"]
)
CLEANER_RECORDS_REMOVED = Counter(
    "tierlog_log_cleaner_records_removed_total",
    "Records the cleaner removed (superseded or expired tombstones)",
    ["topic"],
)
# Erasure (issue 31). Requests by state are cluster-wide (read from Postgres by every
# broker's erasure duty, so any broker's /metrics shows them); the hot counters count this
# broker's replicas. The cold tier's counters are the compaction worker's.
ERASURE_REQUESTS = Gauge(
    "tierlog_erasure_requests", "Erasure requests by state, cluster-wide", ["state"]
)
ERASURE_HOT_RECORDS_REMOVED = Counter(
    "tierlog_erasure_hot_records_removed_total",
    "Records erased from this broker's replicas' local segments",
    ["topic"],
)
ERASURE_HOT_BYTES_REWRITTEN = Counter(
    "tierlog_erasure_hot_bytes_rewritten_total",
    "Bytes of the local segments erasure rewrote (their size before)",
    ["topic"],
)
ERASURE_HOT_SEGMENTS_REWRITTEN = Counter(
    "tierlog_erasure_hot_segments_rewritten_total",
    "Local segments erasure rewrote",
    ["topic"],
)
CLEANER_DIRTY_RATIO = Gauge(
    "tierlog_log_cleaner_dirty_ratio",
    "Dirty share of a partition's cleanable bytes (the cleaner's lag)",
    ["topic", "partition"],
)


# ingest/loop_lag.py: how late the event loop runs a timer (0.2 s: issue 24's bound).
EVENT_LOOP_LAG = Histogram(
    "tierlog_event_loop_lag_seconds",
    "How much later than due the broker's event loop ran a 100 ms timer",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0),
)


class ReplicationMetrics:
    """One broker's replication metrics (hosted partitions, ISR, controller), registered on
    the registry it is given: the default one in a broker process, a fresh
    `CollectorRegistry()` per broker when several share a process. Names, labels and help
    texts are the ones dashboards know (docs/running.md "Metrics" maps them to Kafka's JMX names).
    Kafka's ...PerSec meters are counters here: rate() gives the per-second figure."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        tp = ["topic", "partition"]
        self.log_end_offset = Gauge(
            "tierlog_log_end_offset", "Next offset to assign", tp, registry=registry
        )
        self.high_watermark = Gauge(
            "tierlog_high_watermark", "High watermark", tp, registry=registry
        )
        self.log_start_offset = Gauge(
            "tierlog_log_start_offset", "Log start offset", tp, registry=registry
        )
        self.partitions_led = Gauge(
            "tierlog_partitions_led", "Partitions this broker leads", registry=registry
        )
        # Kafka's OfflineReplicaCount: hosted partitions whose log went offline.
        self.offline_replicas = Gauge(
            "tierlog_offline_replicas",
            "Hosted partitions whose log is offline after a storage error",
            registry=registry,
        )
        self.offline_by_reason = Gauge(
            "tierlog_offline_replicas_by_reason",
            "Offline hosted partitions by why their storage failed (disk_full: ENOSPC; "
            "not_writable; io_error)",
            ["reason"],
            registry=registry,
        )
        self.corrupt_frames = Counter(
            "tierlog_corrupt_frame_reads_total",
            "Reads that met a stored frame failing its CRC or offset check (not served)",
            tp,
            registry=registry,
        )
        self.corrupt_repairs = Counter(
            "tierlog_corrupt_frame_repairs_total",
            "Follower truncations below a corrupt frame, to fetch it again from the leader "
            "(when the leader's whole copy is not the same bytes as this replica's)",
            tp,
            registry=registry,
        )
        self.corrupt_replaced = Counter(
            "tierlog_corrupt_frames_replaced_total",
            "Corrupt frames put back in place from a peer's whole copy of the same frame",
            tp,
            registry=registry,
        )
        self.corrupt_lost = Counter(
            "tierlog_corrupt_committed_frames_total",
            "Committed frames whose only in-sync copy, the leader's, is corrupt (lost unless "
            "a replica out of the ISR still holds them); counted once each",
            tp,
            registry=registry,
        )
        self._health(registry)
        self._controller(registry)

    def _health(self, registry: CollectorRegistry) -> None:
        self.under_replicated = Gauge(
            "tierlog_under_replicated_partitions",
            "Partitions this broker leads whose ISR is smaller than their replica set "
            "(kafka.server:ReplicaManager UnderReplicatedPartitions)",
            registry=registry,
        )
        self.under_min_isr = Gauge(
            "tierlog_under_min_isr_partitions",
            "Partitions this broker leads whose ISR is below min.insync.replicas "
            "(kafka.server:ReplicaManager UnderMinIsrPartitionCount)",
            registry=registry,
        )
        self.isr_shrinks = Counter(
            "tierlog_isr_shrinks",
            "ISR shrinks: lagging followers dropped by their leader, dead brokers fenced out "
            "by the controller (kafka.server:ReplicaManager IsrShrinksPerSec)",
            registry=registry,
        )
        self.isr_expands = Counter(
            "tierlog_isr_expands",
            "Followers that caught up and rejoined the ISR "
            "(kafka.server:ReplicaManager IsrExpandsPerSec)",
            registry=registry,
        )

    def _controller(self, registry: CollectorRegistry) -> None:
        self.offline_partitions_count = Gauge(
            "tierlog_offline_partitions_count",
            "Partitions without a leader, counted by the active controller (0 elsewhere) "
            "(kafka.controller:KafkaController OfflinePartitionsCount)",
            registry=registry,
        )
        self.active_controller = Gauge(
            "tierlog_active_controller_count",
            "1 on the broker holding the controller lease, else 0; the cluster's sum must be 1 "
            "(kafka.controller:KafkaController ActiveControllerCount)",
            registry=registry,
        )
        self.leader_elections = Counter(
            "tierlog_leader_elections",
            "Leaders elected by the controller, clean or unclean "
            "(kafka.controller:ControllerStats LeaderElectionRateAndTimeMs)",
            registry=registry,
        )
        self.unclean_leader_elections = Counter(
            "tierlog_unclean_leader_elections",
            "Leaders elected from outside the ISR (kafka.controller:ControllerStats "
            "UncleanLeaderElectionsPerSec)",
            registry=registry,
        )

    def publish_offsets(self, topic: str, partition: int, leo: int, hw: int, start: int) -> None:
        labels = (topic, str(partition))
        self.log_end_offset.labels(*labels).set(leo)
        self.high_watermark.labels(*labels).set(hw)
        self.log_start_offset.labels(*labels).set(start)

    def forget_partition(self, topic: str, partition: int) -> None:
        """A partition no longer hosted here: its offsets leave /metrics."""
        for gauge in (self.log_end_offset, self.high_watermark, self.log_start_offset):
            with contextlib.suppress(KeyError):
                gauge.remove(topic, str(partition))
