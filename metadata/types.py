"""Plain values the repositories return (immutable, cheap to pass between threads)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    """A partition by its topic's id (Kafka's TopicIdPartition): what the cold tier and the
    repositories key on, since a re-created topic gets a new id (so its old rows and files
    are never mistaken for the new topic's). Hashable: the key of per-partition caches."""

    topic_id: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic_id}-{self.partition}"


class TopicNamePartition(NamedTuple):
    """A partition by its topic's name: what consumer groups assign and commit."""

    topic: str
    partition: int


class BrokerRegistration(NamedTuple):
    id: int
    url: str
    alive: bool  # lease_expires_at > now(), by the database's clock
    lease_expires_at: datetime
    rack: str | None = None
    incarnation: int = 0  # bumped by every register(): tells a restarted broker from the old one
    kafka_address: str | None = None  # HOST:PORT of its Kafka listener, as clients reach it


class TopicInfo(NamedTuple):
    id: str  # uuid text; a re-created topic gets a new id, so stale data can be told apart
    name: str
    partition_count: int
    replication_factor: int
    configs: dict[str, str]  # overrides only, canonical strings; see configs.effective_configs
    created_at: datetime


class PartitionRecord(NamedTuple):
    topic: str
    topic_id: str
    partition: int
    leader: int | None  # None while no replica can lead
    leader_epoch: int
    replicas: list[int]  # the first is the preferred leader
    isr: list[int]
    partition_epoch: int  # bumped by every change of leader, ISR or replicas (CAS token)

    @property
    def tp(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.partition)


# -- tiering (metadata/segment_registry.py) ------------------------------------------------------


class SegmentClaim(NamedTuple):
    topic_id: str
    topic: str
    partition: int
    base_offset: int
    end_offset: int  # exclusive
    size_bytes: int
    attempt: int  # the claim's fencing token (hot_segments.attempts when claimed)
    worker_id: str
    claim_expires_at: datetime

    @property
    def tp(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.partition)


class HotSegment(NamedTuple):
    topic_id: str
    partition: int
    base_offset: int
    end_offset: int
    size_bytes: int
    state: str
    claimed_by: str | None
    attempts: int
    last_error: str | None

    @property
    def tp(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.partition)


class Untiered(NamedTuple):
    topic: str
    partition: int
    segments: int
    records: int  # offsets covered (an upper bound on records after compaction)
    bytes: int


class FileSpec(NamedTuple):
    """What one uploaded data file holds (from the Parquet writer or the Delta add action)."""

    object_key: str
    size_bytes: int
    records: int
    min_timestamp: int  # ms since the epoch
    max_timestamp: int


class ColdFile(NamedTuple):
    id: int
    topic_id: str
    partition: int
    base_offset: int
    last_offset: int  # inclusive
    min_timestamp: int
    max_timestamp: int
    object_key: str
    size_bytes: int
    records: int
    state: str
    delta_version: int | None
    created_at: datetime
    updated_at: datetime
    delete_after: datetime | None

    @property
    def tp(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.partition)


# -- consumer groups (metadata/groups.py) ------------------------------------------------

PartitionMap = dict[str, list[int]]  # {"topic": [partition, ...]}, partitions ascending


class TopicMeta(NamedTuple):
    id: str
    partitions: int


class KafkaRound(NamedTuple):
    """A group's Kafka classic-protocol round when its members assign (groups/client_assigned.py):
    the generation, its phase (joining | syncing | stable), the elected leader, the protocol
    every member runs, the members of the generation and when the phase must end."""

    generation: int
    phase: str
    leader: str | None
    protocol: str | None
    members: tuple[str, ...]
    deadline: datetime | None


class KafkaMembership(NamedTuple):
    """A Kafka client's part of a member: its protocols (name, metadata bytes) in its order of
    preference, the generation it joined (None: none of a client-assigned round) and the
    assignment bytes its leader gave it for that generation."""

    protocols: tuple[tuple[str, bytes], ...]
    generation: int | None
    assignment: bytes | None
    rebalance_timeout_ms: int


class GroupRow(NamedTuple):
    id: int
    name: str
    group_epoch: int  # moves on every membership, subscription or topic change (CAS token)
    assignor: str
    state: str  # empty | reconciling | stable
    subscribed: dict[str, TopicMeta]  # what the current target assignment was computed on
    created_at: datetime
    kafka: KafkaRound | None = None  # a client-assigned Kafka round, if one was ever held


class ConsumerGroupMember(NamedTuple):
    member_id: str
    member_epoch: int  # moves whenever `assigned` changes (CAS token, fences stale commits)
    topics: tuple[str, ...]  # subscription, sorted
    assignor: str | None  # the assignor this member asked for
    session_timeout_ms: int
    joined_at: datetime
    last_heartbeat_at: datetime
    session_expires_at: datetime  # by the database's clock
    target: PartitionMap  # the member's share of the group's target assignment
    assigned: PartitionMap  # what the member was last told it may own
    owned: PartitionMap  # what the member last reported owning
    kafka: KafkaMembership | None = None  # None: an HTTP member


class GroupSnapshot(NamedTuple):
    """A group as read under its row lock, with the database's clock and the topics involved."""

    group: GroupRow
    members: list[ConsumerGroupMember]  # including lapsed sessions: the caller removes those
    topics: dict[str, TopicMeta]  # existing topics among those subscribed or asked about
    now: datetime


class OffsetWrite(NamedTuple):
    topic_id: str
    partition: int
    offset: int
    metadata: str | None


class GroupWrite(NamedTuple):
    """What one decision changes; applied in the transaction that read the snapshot."""

    group: GroupRow | None = None  # the new group row (None: unchanged)
    members: tuple[ConsumerGroupMember, ...] = ()  # inserted or updated
    removed: tuple[str, ...] = ()  # member ids
    offsets: tuple[OffsetWrite, ...] = ()
    delete_group: bool = False  # the group, its members and offsets go (FK cascades)
    deleted_offsets: tuple[tuple[str, int], ...] = ()  # (topic id, partition): Kafka's OffsetDelete


class CommittedOffset(NamedTuple):
    topic: str
    topic_id: str
    partition: int
    offset: int
    metadata: str | None
    committed_at: datetime


class GroupSummary(NamedTuple):
    name: str
    state: str
    group_epoch: int
    assignor: str
    members: int  # live members (sessions not lapsed)
    created_at: datetime
