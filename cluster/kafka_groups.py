"""The seam between the Kafka listener (ingest/kafka) and consumer groups (groups/): Kafka's
classic group protocol in plain Python terms, so neither role imports the other.

groups/ implements ``ClassicGroups`` on the same Postgres group store as HTTP groups; the
composition root (tierlog/cli/extensions.py) hands it to a broker's Kafka listener through
``Extension.kafka_groups``. The listener decodes Kafka's bytes (subscriptions, assignments)
and encodes the answers; the implementation decides membership, generations and offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from metadata.types import TopicNamePartition


class ClassicGroupError(Exception):
    """A classic-protocol answer that tierlog's HTTP groups have no name for; ``kafka_name``
    is Kafka's error name (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION)."""

    def __init__(self, kafka_name: str, message: str) -> None:
        super().__init__(message)
        self.kafka_name = kafka_name
        self.message = message


class JoinGroup(NamedTuple):
    member_id: str  # "" for a new member
    topics: tuple[str, ...]  # the subscription (the union of what the protocols name)
    owned: frozenset[TopicNamePartition]  # what a cooperative member still holds
    assignors: tuple[str, ...]  # the client's protocol names, in its order of preference
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...] = ()  # (name, metadata) as the client sent them
    rebalance_timeout_ms: int = 60_000


class Joined(NamedTuple):
    member_id: str
    generation: int
    assignor: str  # the protocol the member must run (one of its own)
    leader: str = ""  # "": the server assigns; else the member that runs the assignor
    members: tuple[tuple[str, bytes], ...] = ()  # to the leader: each member's metadata


class MemberAssignment(NamedTuple):
    """A leader's assignment for one member: the bytes members receive unchanged, and the
    partitions in them (the listener decodes; the group store fences commits by them)."""

    member_id: str
    raw: bytes
    partitions: tuple[TopicNamePartition, ...]


class Synced(NamedTuple):
    """SyncGroup's answer: the leader's bytes for this member (client-assigned groups), else
    the server's partitions for the listener to encode."""

    partitions: tuple[TopicNamePartition, ...]
    raw: bytes | None = None


class CommitEntry(NamedTuple):
    topic: str
    partition: int
    offset: int
    metadata: str | None


class MemberDescription(NamedTuple):
    member_id: str
    topics: tuple[str, ...]  # the subscription
    metadata: bytes | None  # a Kafka client's metadata for the group's protocol (else None)
    assignment: bytes | None  # what its leader sent it (client-assigned groups, else None)
    partitions: tuple[TopicNamePartition, ...]  # what it may own now
    epoch: int = 0  # its member epoch (KIP-848) or generation
    target: tuple[TopicNamePartition, ...] = ()  # the server's target for it (KIP-848)


class GroupDescription(NamedTuple):
    """A group as Kafka's DescribeGroups and ListGroups name it: Kafka's state (Empty,
    PreparingRebalance, CompletingRebalance, Stable, Dead) and protocol."""

    name: str
    state: str
    protocol: str
    members: tuple[MemberDescription, ...]
    group_epoch: int = 0
    consumer_state: str = "Dead"  # KIP-848's name: Empty, Reconciling, Stable, Dead
    classic: bool = False  # every member speaks the classic protocol (a "classic" group)


class ConsumerHeartbeat(NamedTuple):
    """KIP-848's ConsumerGroupHeartbeat in plain terms (topics by name)."""

    member_id: str  # "" from a v0 client's first heartbeat: the server names the member
    member_epoch: int  # 0 joins (or rejoins), -1 leaves, -2 a static member leaves
    topics: tuple[str, ...] | None  # None: unchanged
    assignor: str | None  # Kafka's server assignor name (uniform, range) or None
    owned: tuple[TopicNamePartition, ...] | None  # None: unchanged


class ConsumerAssigned(NamedTuple):
    member_id: str
    member_epoch: int  # -1 once it left
    heartbeat_interval_ms: int
    assignment: tuple[TopicNamePartition, ...]


class ClassicGroups(Protocol):
    """Each method raises TierlogError (Kafka-named codes) or ClassicGroupError."""

    async def join(self, group: str, req: JoinGroup) -> Joined: ...

    async def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        assignments: Sequence[MemberAssignment] = (),
    ) -> Synced: ...

    async def heartbeat(self, group: str, member_id: str, generation: int) -> None: ...

    async def leave(self, group: str, member_id: str) -> None: ...

    async def commit(
        self, group: str, member_id: str | None, generation: int, offsets: Sequence[CommitEntry]
    ) -> None: ...

    async def commit_transactional(self, group: str, offsets: Sequence[CommitEntry]) -> None:
        """A committed transaction's offsets: applied without a member's fence."""
        ...

    async def committed(self, group: str) -> tuple[CommitEntry, ...]: ...

    async def consumer_heartbeat(self, group: str, hb: ConsumerHeartbeat) -> ConsumerAssigned: ...

    async def list_groups(self) -> tuple[GroupDescription, ...]: ...  # members left out

    async def describe(self, group: str) -> GroupDescription: ...  # Dead: no such group

    async def delete(self, group: str) -> None: ...

    async def delete_offsets(
        self, group: str, partitions: Sequence[TopicNamePartition]
    ) -> dict[TopicNamePartition, str | None]:
        """Kafka's error name per partition (None: deleted, or nothing was committed)."""
        ...
