"""Leadership back to the preferred replica (replicas[0]), without losing an acknowledged
record: Kafka's auto leader rebalance, done by the leader rather than the controller.

The controller cannot know whether the preferred replica holds what the leader acknowledged
with acks=1 (above the high watermark); moved at the wrong moment, those records were lost
(issue 12, found 5). So the leader moves it itself, once the preferred replica has been in
the ISR for `delay_s` (and never sooner than `interval_s` after its last move of the
partition): it stops acknowledging writes (produce gets the retriable NOT_LEADER_OR_FOLLOWER),
waits up to `catch_up_s` for the preferred follower to fetch up to its log end, then hands
leadership over with a compare-and-set fenced on its epochs (PartitionStateRepo.hand_over).
If the follower does not catch up in time, writes resume and the move is tried later.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from cluster.clock import SYSTEM_CLOCK, Clock
from ingest.replication.handover import hand_over, handed_over
from ingest.replication.partition import Partition, Role
from metadata.partition_state import PartitionStateRepo
from metadata.types import TopicNamePartition

log = logging.getLogger("tierlog.preferred_leader")


class Timing(NamedTuple):
    delay_s: float = 1.0  # the preferred replica in the ISR this long first
    interval_s: float = 5.0  # at most one move per partition this often
    catch_up_s: float = 2.0  # writes are held at most this long per attempt


DEFAULT_TIMING = Timing()


class PreferredLeaderMover:
    def __init__(
        self,
        me: int,
        partitions: Callable[[], dict[TopicNamePartition, Partition]],
        repo: PartitionStateRepo,
        refresh_metadata: Callable[[], Awaitable[None]],
        timing: Timing = DEFAULT_TIMING,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.me, self._partitions, self.repo = me, partitions, repo
        self.clock = clock  # when a move is due (the catch-up wait stays on the loop's time)
        self._refresh, self.timing = refresh_metadata, timing
        self._in_sync_since: dict[TopicNamePartition, float] = {}
        self._last_try: dict[TopicNamePartition, float] = {}

    def due(self, key: TopicNamePartition, state: Partition, now: float) -> bool:
        """Is a move of `state` back to its preferred replica due now?"""
        preferred = state.replicas[0] if state.replicas else self.me
        if state.role is not Role.LEADER or preferred == self.me or preferred not in state.isr:
            self._in_sync_since.pop(key, None)
            return False
        since = self._in_sync_since.setdefault(key, now)
        last = self._last_try.get(key)
        return now - since >= self.timing.delay_s and (
            last is None or now - last >= self.timing.interval_s
        )

    async def run_once(self) -> None:
        now = self.clock.monotonic()
        partitions = self._partitions()
        for key in [k for k in self._in_sync_since if k not in partitions]:
            self._in_sync_since.pop(key, None)
            self._last_try.pop(key, None)
        for key, state in list(partitions.items()):
            if self.due(key, state, now):
                self._last_try[key] = now
                await self._move(state)

    async def _move(self, state: Partition) -> None:
        preferred = state.replicas[0]
        state.handing_off = True  # from here on no write is acknowledged
        moved = False
        try:
            deadline = time.monotonic() + self.timing.catch_up_s
            while not state.holds_everything(preferred):
                if time.monotonic() > deadline or state.role is not Role.LEADER:
                    return
                await asyncio.sleep(0.02)
            info = await hand_over(self.repo, self.me, state, preferred)
            if info is None:
                return
            moved = True  # stays fenced: it leads no more, whatever it has heard yet
            log.info(
                "leadership moved back to the preferred replica",
                extra={**handed_over(state, info), "log_end_offset": state.log.log_end_offset},
            )
            await self._refresh()  # become the new leader's follower
        finally:
            if not moved:
                state.handing_off = False
