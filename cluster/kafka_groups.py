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


class Joined(NamedTuple):
    member_id: str
    generation: int
    assignor: str  # the protocol the member must run (one of its own)


class CommitEntry(NamedTuple):
    topic: str
    partition: int
    offset: int
    metadata: str | None


class ClassicGroups(Protocol):
    """Each method raises TierlogError (Kafka-named codes) or ClassicGroupError."""

    async def join(self, group: str, req: JoinGroup) -> Joined: ...

    async def sync(
        self, group: str, member_id: str, generation: int
    ) -> tuple[TopicNamePartition, ...]: ...

    async def heartbeat(self, group: str, member_id: str, generation: int) -> None: ...

    async def leave(self, group: str, member_id: str) -> None: ...

    async def commit(
        self, group: str, member_id: str | None, generation: int, offsets: Sequence[CommitEntry]
    ) -> None: ...

    async def commit_transactional(self, group: str, offsets: Sequence[CommitEntry]) -> None:
        """A committed transaction's offsets: applied without a member's fence."""
        ...

    async def committed(self, group: str) -> tuple[CommitEntry, ...]: ...
