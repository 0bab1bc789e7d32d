"""A leader handing its partition to another in-sync replica: the fenced compare-and-set
both reasons for it share (its log failed: ReplicaManager; the preferred replica caught up:
PreferredLeaderMover)."""

from __future__ import annotations

import asyncio

from ingest.replication.partition import Partition
from metadata.partition_state import PartitionStateRepo
from metadata.types import PartitionRecord


async def hand_over(
    repo: PartitionStateRepo, me: int, state: Partition, to: int | None = None
) -> PartitionRecord | None:
    """Hand `state` to `to` (None: any live in-sync replica), fenced on the epochs this leader
    holds, off the event loop. None when the race was lost or no successor qualifies."""
    return await asyncio.to_thread(
        repo.hand_over,
        state.tp,
        me,
        state.leader_epoch,
        state.partition_epoch,
        to,
    )


def handed_over(state: Partition, info: PartitionRecord) -> dict[str, object]:
    """The log fields of a hand-over: the partition and who leads it now."""
    return {
        "topic": state.topic,
        "partition": state.partition,
        "leader": info.leader,
        "leader_epoch": info.leader_epoch,
    }
