"""A leader handing its partition to another in-sync replica: the fenced compare-and-set
both reasons for it share (its log failed: ReplicaManager; the preferred replica caught up:
PreferredLeaderMover)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from ingest.replication.partition import Partition, Role
from metadata.partition_state import PartitionStateRepo
from metadata.types import PartitionRecord, TopicNamePartition

log = logging.getLogger("tierlog.broker")
# On SIGTERM, how long a partition's writes are held for a follower to catch up before its
# leadership is handed over (Kafka's controlled shutdown).
RESIGN_S = 1.0


async def hand_over(
    repo: PartitionStateRepo,
    me: int,
    state: Partition,
    to: int | None = None,
    *,
    leave_isr: bool | None = None,
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
        leave_isr=leave_isr,
    )


async def resign(
    repo: PartitionStateRepo, me: int, state: Partition, catch_up_s: float
) -> PartitionRecord | None:
    """A broker shutting down hands the partition over now (Kafka's controlled shutdown)
    rather than leave it leaderless until its lease ends: writes stop being acknowledged,
    an in-sync follower that holds everything it wrote is waited for (at most `catch_up_s`,
    so that no acks=1 record is lost), and leadership goes to it, or to any live in-sync
    replica when none caught up; this broker leaves the ISR (it rejoins once back and caught
    up). None when it could not be handed over: it keeps leading until it stops; at once when
    no other replica is in sync (nobody could take it, so no write is held for one)."""
    if not any(r != me for r in state.isr):
        return None
    state.handing_off = True
    moved = False
    try:
        deadline = time.monotonic() + catch_up_s
        to = None
        while to is None and time.monotonic() < deadline and state.role is Role.LEADER:
            to = next((r for r in state.isr if r != me and state.holds_everything(r)), None)
            if to is None:
                await asyncio.sleep(0.02)
        if state.role is not Role.LEADER:
            return None
        info = await hand_over(repo, me, state, to, leave_isr=True)
        moved = info is not None
        return info
    finally:
        if not moved:
            state.handing_off = False


def handed_over(state: Partition, info: PartitionRecord) -> dict[str, object]:
    """The log fields of a hand-over: the partition and who leads it now."""
    return {
        "topic": state.topic,
        "partition": state.partition,
        "leader": info.leader,
        "leader_epoch": info.leader_epoch,
    }


async def hand_over_leaderships(
    repo: PartitionStateRepo, broker_id: int, partitions: Mapping[TopicNamePartition, Partition]
) -> int:
    """Controlled shutdown: every partition this broker leads handed to a caught-up in-sync
    follower (resign() each), all at once: the shutdown waits at most RESIGN_S for followers
    to catch up, not RESIGN_S per partition (one at a time, a broker leading 11 partitions
    whose followers lagged used up the whole shutdown budget and left the rest to the lease);
    how many moved. A failure leaves that one for the lease."""
    led = [s for s in list(partitions.values()) if s.role is Role.LEADER]
    outcomes = await asyncio.gather(*(_resign_logged(repo, broker_id, s) for s in led))
    moved = sum(outcomes)
    log.info(
        "leaderships handed over on shutdown",
        extra={"broker_id": broker_id, "led": len(led), "moved": moved},
    )
    return moved


async def _resign_logged(repo: PartitionStateRepo, broker_id: int, state: Partition) -> bool:
    try:
        return await resign(repo, broker_id, state, RESIGN_S) is not None
    except Exception:
        log.exception("hand-over on shutdown failed", extra={"topic": state.topic})
        return False
