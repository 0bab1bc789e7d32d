"""Kafka's ElectLeaders. A preferred election (type 0) is the preferred-leader mover's move
(ingest/replication/preferred_leader.py): the leader hands leadership to replicas[0] once
that replica is in the ISR, after it caught up, so no acknowledged record is lost; this
waits (up to the request's timeout) until the partition's state shows it done. Unclean
election (type 1) is never done: tierlog elects only from the ISR, so it is answered as Kafka
answers with unclean election disabled.

Answers, per partition, Kafka's: ELECTION_NOT_NEEDED when the preferred replica leads already
(type 0) or a leader exists (type 1), PREFERRED_LEADER_NOT_AVAILABLE when the preferred
replica is out of the ISR or down, ELIGIBLE_LEADERS_NOT_AVAILABLE for an unclean election of
a partition without a leader, REQUEST_TIMED_OUT when the move did not happen in time."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from logformat.errors import ErrorCode, TierlogError
from metadata.partition_state import PartitionStateRepo
from metadata.types import PartitionRecord, TopicIdPartition

if TYPE_CHECKING:
    from ingest.broker import Broker

PREFERRED, UNCLEAN = 0, 1  # Kafka's ElectionType ids
POLL_S = 0.1  # how often the partition's state is read while a move is awaited
MAX_WAIT_S = 60.0


class LeaderElections:
    """ElectLeaders for any partition, from any broker (built once, in Services)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._repo = PartitionStateRepo(broker.engine)

    def every_partition(self) -> list[tuple[str, int]]:
        """What an election of all partitions (a null list) covers."""
        return [
            (view.info.name, p.partition)
            for view in self._broker.cache.topics()
            for p in view.partitions
        ]

    async def elect(self, election_type: int, topic: str, partition: int, timeout_s: float) -> None:
        """Returns once the election is done; TierlogError with Kafka's code otherwise."""
        if election_type not in (PREFERRED, UNCLEAN):
            why = f"unknown election type {election_type} (0: preferred, 1: unclean)"
            raise TierlogError(ErrorCode.INVALID_REQUEST, why)
        state = await self._state(topic, partition)
        if election_type == UNCLEAN:
            if state.leader is not None:
                raise TierlogError(
                    ErrorCode.ELECTION_NOT_NEEDED, f"{topic}-{partition} has a leader"
                )
            raise TierlogError(
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"no in-sync replica of {topic}-{partition} is alive, and unclean leader "
                "election is disabled",
            )
        preferred = state.replicas[0]
        if state.leader == preferred:
            why = f"the preferred replica {preferred} leads {topic}-{partition} already"
            raise TierlogError(ErrorCode.ELECTION_NOT_NEEDED, why)
        alive = await asyncio.to_thread(self._broker.brokers.live_ids)  # by the leases now
        if preferred not in state.isr or preferred not in alive:
            why = f"the preferred replica {preferred} of {topic}-{partition} is not in sync"
            raise TierlogError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, why)
        deadline = time.monotonic() + min(max(timeout_s, 0.0), MAX_WAIT_S)
        while state.leader != preferred:
            if time.monotonic() >= deadline:
                why = f"leadership of {topic}-{partition} did not move to {preferred} in time"
                raise TierlogError(ErrorCode.REQUEST_TIMED_OUT, why)
            await asyncio.sleep(POLL_S)
            state = await self._state(topic, partition)

    async def _state(self, topic: str, partition: int) -> PartitionRecord:
        view = self._broker.cache.topic(topic)
        found = None
        if view is not None and 0 <= partition < len(view.partitions):
            tp = TopicIdPartition(view.info.id, partition)
            found = await asyncio.to_thread(self._repo.get, tp)
        if found is None:
            raise TierlogError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}"
            )
        return found
