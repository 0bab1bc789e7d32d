"""A hosted partition (Kafka's Partition): its role (leader or follower), ISR, high watermark
and waiters, over its UnifiedLog (the log with its producer state).

As leader it group-commits produce requests (group_commit.py), tracks followers and the ISR
(isr.py's rules), and advances the high watermark. As follower it appends the leader's frames
as they are. Every change of role, ISR or high watermark wakes the waiters (acks=all
producers, long-polling consumers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from cluster.clock import SYSTEM_CLOCK, Clock
from ingest.log.local_log import LocalLog
from ingest.metrics import ReplicationMetrics
from ingest.replication import write_answers
from ingest.replication.group_commit import AppendResult, GroupCommit
from ingest.replication.isr import FollowerProgress, high_watermark, lagging, may_join
from ingest.replication.refusals import RecentRefusals
from ingest.replication.roles import Role
from ingest.unified.producer_state import ProducerStateManager
from ingest.unified.unified_log import UnifiedLog
from logformat.errors import ErrorCode, TierlogError
from metadata.types import PartitionRecord, TopicIdPartition

__all__ = ["AppendResult", "Partition", "Role"]

logger = logging.getLogger("tierlog.partition")


class Partition:
    def __init__(
        self,
        log_: LocalLog,
        me: int,
        lease_ok: Callable[[], bool] = lambda: True,
        on_append: Callable[[], None] = lambda: None,
        *,
        metrics: ReplicationMetrics | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        # The broker's metrics and clock (its ReplicaManager passes them); alone (unit
        # tests), metrics on a registry nobody scrapes.
        self.metrics = metrics or ReplicationMetrics(CollectorRegistry())
        self.clock = clock
        self.unified = UnifiedLog(log_)  # rebuilds the producer state from the log
        self.topic, self.partition, self.topic_id = log_.topic, log_.partition, log_.topic_id
        self.me = me
        self.lease_ok = lease_ok  # this broker's cluster lease, confirmed now
        self._on_append = on_append
        self.role = Role.OFFLINE
        self.leader_id: int | None = None
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.epoch_start_offset = 0
        self.followers: dict[int, FollowerProgress] = {}
        self.high_watermark = self.unified.read_hw_checkpoint()
        self.isr_change_pending = False
        self._published: tuple[int, int, int] | None = None  # (LEO, HW, log start) on /metrics
        # Offset of a corrupt frame found in this replica's log: put back in place from a
        # peer's whole copy (replication/frame_repair.py, from ReplicaManager.heal_offline).
        self.repair_from: int | None = None
        # A follower whose leader's whole copy of that frame is other bytes (compacted
        # apart): its fetcher truncates below it and fetches again (corruption.repair).
        self.refetch_wanted = False
        # The leader cannot serve this partition (a corrupt frame of its own): hand it to
        # another in-sync replica (ReplicaManager.heal_offline), as for a failed log.
        self.handoff_wanted = False
        # Committed offsets of this leader's corrupt frames that no in-sync replica could take
        # over: the only in-sync copy is lost (reported once each: corruption.no_taker).
        self.lost_frames: set[int] = set()
        # Leadership is being handed to the preferred replica (replication/preferred_leader.py):
        # nothing more may be acknowledged until it has moved or the move is called off.
        self.handing_off = False
        # An ISR change sent to Postgres but not yet confirmed. Until it is, the high watermark
        # counts the union of both ISRs (Kafka's "maximal ISR", KIP-497): a member being added
        # may already be electable by the controller, so nothing it lacks may be acknowledged.
        self.pending_isr: list[int] = []
        # The leader epoch this broker last stopped leading in, and its high watermark then:
        # what was committed in that epoch (write_answers.py), whatever its log does next.
        self.left: tuple[int, int] = (-1, -1)
        # When this leader last refused a write before it reached the log: a sequence gap
        # that follows is its own doing, answered retriably (replication/refusals.py).
        self.refusals = RecentRefusals(clock)
        self._commits = GroupCommit(
            self.unified,
            self.ensure_leader,
            lambda: self.leader_epoch,
            self._after_append,
            self.refusals,
        )
        self._changed = asyncio.Event()  # producers waiting for acks=all
        self._data = asyncio.Event()  # long-polling consumers, woken after the producers
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def leads(self) -> bool:
        """Leader of its current epoch and not closing."""
        return self.role is Role.LEADER and not self._closed

    async def wait_change(self, timeout_s: float) -> None:
        """Until the role, ISR or high watermark changes, or `timeout_s` passes."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):  # no task per wait, as wait_for makes
                await self._changed.wait()

    @property
    def tp(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.partition)

    @property
    def log(self) -> LocalLog:
        """The local log (reads, segments, retention); changes go through `unified`."""
        return self.unified.local

    @property
    def producers(self) -> ProducerStateManager:
        return self.unified.producers

    # -- metadata ---------------------------------------------------------------------------

    def apply(self, info: PartitionRecord) -> bool:
        """Adopt the partition's metadata; True when this broker's role or epoch changed."""
        if info.partition_epoch < self.partition_epoch and info.leader_epoch <= self.leader_epoch:
            return False  # stale metadata (a newer change was already applied locally)
        changed = info.leader_epoch != self.leader_epoch or info.leader != self.leader_id
        self.replicas, self.isr = list(info.replicas), list(info.isr)
        self.partition_epoch = info.partition_epoch
        if not changed:
            self._wake()
            return False
        if self.role is Role.LEADER:
            self.left = (self.leader_epoch, self.high_watermark)
        self.leader_id, self.leader_epoch = info.leader, info.leader_epoch
        if info.leader == self.me:
            self._become_leader()
        else:
            self.role = Role.FOLLOWER if info.leader is not None else Role.OFFLINE
            self.followers = {}
            self._fail_pending(ErrorCode.NOT_LEADER_OR_FOLLOWER, "leadership moved")
        logger.info(
            "partition role",
            extra={
                "topic": self.topic,
                "partition": self.partition,
                "partition_role": self.role.value,
                "leader": info.leader,
                "leader_epoch": info.leader_epoch,
                "isr": info.isr,
            },
        )
        self._wake()
        return True

    def _become_leader(self) -> None:
        self.role = Role.LEADER
        self.handing_off = False
        self.epoch_start_offset = self.unified.begin_epoch(self.leader_epoch)
        # Kafka: every follower counts as caught up at the moment we become leader.
        now = self._now_ms()
        self.followers = {
            r: FollowerProgress(last_caught_up_ms=now) for r in self.replicas if r != self.me
        }
        self._advance_hw()

    def _now_ms(self) -> float:
        return self.clock.monotonic() * 1000

    # -- leader: produce --------------------------------------------------------------------

    def ensure_leader(self) -> None:
        """Raise unless this broker may append to the partition now; a refusal is noted (a
        sequence gap right after it is this leader's doing: replication/refusals.py)."""
        why = self._write_refusal()
        if why is not None:
            raise self.refusals.note(why)

    def _write_refusal(self) -> TierlogError | None:
        if self._closed or self.role is not Role.LEADER:
            return TierlogError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.me} does not lead {self.topic}-{self.partition}"
                f" (leader: {self.leader_id})",
            )
        # Still the leader of this epoch, but not taking writes now: a retriable error that
        # does not say "not leader", since the epoch has not moved (librdkafka ignores
        # metadata whose leader epoch is not newer, so after NOT_LEADER_OR_FOLLOWER its
        # producer stayed parked until its messages timed out).
        if self.handing_off:
            return TierlogError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"leadership of {self.topic}-{self.partition} is moving to broker "
                f"{self.replicas[0]}; retry shortly",
            )
        if not self.lease_ok():
            # A paused or partitioned leader whose lease lapsed may already be replaced.
            return TierlogError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"broker {self.me} cannot confirm its cluster lease; it may no longer lead "
                f"{self.topic}-{self.partition}: retry",
            )
        return None

    async def append(
        self, frames: list[bytearray], acks: int, min_insync: int, timeout_s: float
    ) -> list[AppendResult]:
        """Append as leader (offsets assigned here); with acks=-1 wait until committed."""
        queued = self.submit(frames, acks, min_insync)
        return await self.completed(queued, acks, min_insync, timeout_s)

    def submit(
        self, frames: list[bytearray], acks: int, min_insync: int
    ) -> asyncio.Future[list[AppendResult]]:
        """append()'s first half, synchronous: checks, then the frames queued for the next
        group commit. Appends are written in the order they were submitted, so a caller
        that must keep an order (a Kafka connection's pipelined produce requests) submits
        in that order and may wait for completed() concurrently."""
        self.ensure_leader()
        if acks == -1 and len(self.isr) < min_insync:
            raise self.refusals.note(
                TierlogError(
                    ErrorCode.NOT_ENOUGH_REPLICAS,
                    f"{self.topic}-{self.partition} has {len(self.isr)} in-sync replicas "
                    f"({self.isr}); min.insync.replicas is {min_insync}",
                )
            )
        return self._commits.submit(frames)

    async def completed(
        self,
        queued: asyncio.Future[list[AppendResult]],
        acks: int,
        min_insync: int,
        timeout_s: float,
    ) -> list[AppendResult]:
        """append()'s second half: the submitted frames' offsets once written (acks=1), or
        once committed (acks=-1), and in both cases only while this broker provably still
        leads (write_answers.py)."""
        results = await queued
        end_offset = results[-1].last_offset + 1
        deadline = time.monotonic() + timeout_s
        if acks == -1:
            await write_answers.wait_committed(self, end_offset, min_insync, deadline, timeout_s)
        if acks != 0:
            await write_answers.settle(self, end_offset, deadline, timeout_s)
        return results

    def _after_append(self) -> None:
        self._advance_hw()
        self._on_append()

    # -- leader: followers ------------------------------------------------------------------

    def record_follower_fetch(self, replica: int, fetch_offset: int) -> None:
        progress = self.followers.setdefault(replica, FollowerProgress())
        progress.on_fetch(fetch_offset, self.log.log_end_offset, self._now_ms())
        self._advance_hw()

    def holds_everything(self, replica: int) -> bool:
        """Has follower `replica` fetched up to this leader's log end (every record it wrote,
        acknowledged or not)?"""
        progress = self.followers.get(replica)
        return progress is not None and progress.leo >= self.log.log_end_offset

    def isr_expansion(self, replica: int) -> list[int] | None:
        """The new ISR if `replica` may join it now, else None."""
        progress = self.followers.get(replica)
        if (
            replica in self.isr
            or replica not in self.replicas
            or progress is None
            or not may_join(progress, self.high_watermark, self.epoch_start_offset)
        ):
            return None
        return [r for r in self.replicas if r in self.isr or r == replica]

    def isr_shrink(self, lag_ms: int) -> list[int] | None:
        """The new ISR without members lagging more than lag_ms, else None."""
        out = lagging(self.me, self.isr, self.followers, self._now_ms(), lag_ms)
        return [r for r in self.isr if r not in out] if out else None

    def _advance_hw(self) -> None:
        if self.role is not Role.LEADER:
            return
        maximal = self.isr + [r for r in self.pending_isr if r not in self.isr]
        hw = high_watermark(
            self.me, self.log.log_end_offset, maximal, self.followers, self.high_watermark
        )
        if hw != self.high_watermark:
            self.high_watermark = min(hw, self.log.log_end_offset)
            self._wake()
        self._publish_offsets()

    def begin_isr_change(self, new_isr: list[int]) -> None:
        self.isr_change_pending = True
        self.pending_isr = list(new_isr)

    def end_isr_change(self) -> None:
        self.isr_change_pending = False
        self.pending_isr = []
        self._advance_hw()

    def set_isr(self, info: PartitionRecord) -> None:
        """After this leader's own compare-and-set of the ISR succeeded."""
        self.isr, self.partition_epoch = list(info.isr), info.partition_epoch
        self._advance_hw()
        self._wake()

    # -- follower ---------------------------------------------------------------------------

    def append_replicated(
        self, data: memoryview, leader_hw: int, leader_log_start: int = -1
    ) -> None:
        self.unified.append_replicated(data)
        hw = max(self.high_watermark, min(leader_hw, self.log.log_end_offset))
        if hw != self.high_watermark:
            self.high_watermark = hw
            self._wake()  # consumers long-polling this follower (follower fetching, KIP-392)
        if leader_log_start > self.log.log_start_offset:
            # Kafka's follower takes the leader's log start after each append (DeleteRecords,
            # retention); local retention then deletes the segments wholly below it.
            self.unified.advance_log_start(min(leader_log_start, self.log.log_end_offset))
        self._publish_offsets()

    def truncate_to(self, offset: int) -> bool:
        """Truncate the log (a follower diverging from its leader); False if nothing changed:
        no bytes cut and no epoch forgotten, so asking the leader again would loop."""
        before = (self.log.log_end_offset, self.log.latest_epoch)
        new_leo = self.unified.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, new_leo)
        changed = (new_leo, self.log.latest_epoch) != before
        if changed:
            logger.warning(
                "truncated divergent tail",
                extra={
                    "topic": self.topic,
                    "partition": self.partition,
                    "to": new_leo,
                    "from": before[0],
                    "latest_epoch": self.log.latest_epoch,
                },
            )
        return changed

    def restart_at(self, offset: int) -> None:
        self.unified.truncate_fully_and_start_at(offset)
        self.high_watermark = offset

    # -- consumers --------------------------------------------------------------------------

    async def wait_for_data(self, offset: int, timeout_s: float) -> None:
        """Return once the high watermark passes `offset`, or after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while self.high_watermark <= offset and not self._closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._data.wait()

    # -- housekeeping -----------------------------------------------------------------------

    def _wake(self) -> None:
        # Swap in fresh events so woken waiters re-check without a lost-wakeup window.
        # Producers first: their answers must not queue behind a thousand long polls.
        event, self._changed = self._changed, asyncio.Event()
        event.set()
        data, self._data = self._data, asyncio.Event()
        data.set()

    def _fail_pending(self, code: ErrorCode, why: str) -> None:
        self._commits.fail_all(TierlogError(code, f"{self.topic}-{self.partition}: {why}"))

    def _publish_offsets(self) -> None:
        # On every follower fetch a leader serves, most of them (idle, long-polled) changing
        # nothing: three labelled gauge writes each were ~8% of serving one.
        offsets = (self.log.log_end_offset, self.high_watermark, self.log.log_start_offset)
        if offsets != self._published:
            self._published = offsets
            self.metrics.publish_offsets(self.topic, self.partition, *offsets)

    def checkpoint_hw(self) -> None:
        """Persist the high watermark (Kafka's replication-offset-checkpoint), atomically."""
        self.unified.checkpoint_hw(self.high_watermark)

    def close(self) -> None:
        self._closed = True
        self._fail_pending(ErrorCode.NOT_LEADER_OR_FOLLOWER, "the partition is closing")
        self.unified.close(self.high_watermark)
        self._wake()
        self.metrics.forget_partition(self.topic, self.partition)
