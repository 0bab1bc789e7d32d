"""What a leader answers for a write it has appended (Kafka's Partition.appendRecordsToLeader
answer, plus the lease rule): acks=all waits until committed; acks=1 and acks=all alike are
answered success only while this broker provably leads, or once committed.

Issue 26: an acks=1 write taken just before a pause was answered success after it, once a
leader lacking it was elected (an acknowledged record lost); a committed write answered
NOT_LEADER_OR_FOLLOWER was sent again by librdkafka under a producer epoch it had bumped
meanwhile (a duplicate no broker can detect).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from ingest.log.frame_headers import epoch_at
from ingest.log.local_log import LocalLog
from ingest.replication.roles import Role
from logformat.errors import ErrorCode, TierlogError

# How often a replicated write waiting on a lease in doubt looks at it again.
LEASE_RECHECK_S = 0.05


class Partition(Protocol):
    """What the answers read of a hosted partition (replication/partition.py's Partition,
    named here by shape so that neither module imports the other)."""

    topic: str
    partition: int
    me: int
    role: Role
    isr: list[int]
    high_watermark: int
    left: tuple[int, int]  # (leader epoch it last stopped leading in, its HW then)
    lease_ok: Callable[[], bool]

    @property
    def log(self) -> LocalLog: ...

    def leads(self) -> bool: ...

    async def wait_change(self, timeout_s: float) -> None: ...


async def wait_committed(
    p: Partition, end_offset: int, min_insync: int, deadline: float, timeout_s: float
) -> None:
    """acks=all: until the high watermark passes `end_offset`, or why it never will."""
    while p.high_watermark < end_offset:
        if not p.leads():
            raise TierlogError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"leadership of {p.topic}-{p.partition} moved before the write "
                "was replicated; it may or may not survive",
            )
        if len(p.isr) < min_insync:
            raise TierlogError(
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                f"the ISR of {p.topic}-{p.partition} shrank to {p.isr} "
                f"(min.insync.replicas {min_insync}) before the write was replicated",
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TierlogError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"the ISR {p.isr} did not replicate the write within {timeout_s:.0f}s",
            )
        await p.wait_change(remaining)


async def settle(p: Partition, end_offset: int, deadline: float, timeout_s: float) -> None:
    """An appended write is answered success only while this broker provably leads, or
    once committed (below the high watermark every electable replica holds it, whoever
    leads: Kafka answers it success). With the lease in doubt (Postgres away, a pause)
    the answer waits: lease confirmed, success; leadership moved, success if committed
    else NOT_LEADER_OR_FOLLOWER; past the timeout, REQUEST_TIMED_OUT (may or may not
    stand)."""
    while True:
        if not p.leads():
            if committed_when_left(p, end_offset):
                return  # the elected replica holds it, at these offsets
            raise TierlogError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"leadership of {p.topic}-{p.partition} moved before the write was "
                "committed; it may or may not survive",
            )
        if p.lease_ok():
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            # "May or may not stand" (retriable, possibly persisted), not "not leader"
            # in an unchanged epoch.
            raise TierlogError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"broker {p.me} could not confirm its cluster lease within "
                f"{timeout_s:.0f}s: the write may or may not stand; retry",
            )
        await p.wait_change(min(remaining, LEASE_RECHECK_S))  # the lease has no event


def committed_when_left(p: Partition, end_offset: int) -> bool:
    """Was everything below `end_offset` committed while this broker led, and is it
    still what its log holds there (not cut and written again by the next leader, whose
    frames carry a later epoch than the one it left)?"""
    if p.role is Role.LEADER:  # closing while it leads
        return p.high_watermark >= end_offset
    left_epoch, hw = p.left
    log_ = p.log
    return (
        hw >= end_offset
        and end_offset <= log_.log_end_offset
        and epoch_at(log_.leader_epochs(), end_offset - 1) <= left_epoch
    )
