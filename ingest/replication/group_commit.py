"""The leader's produce path: group commit (Kafka's Partition.appendRecordsToLeader, batched).

Each produce request queues its frames and waits on a future; one drain, scheduled on the
event loop, checks every queued request's idempotence (sequence, epoch) against the producer
state plus what the same drain staged before it, then writes all accepted frames with ONE log
append and answers every request. A request that fails its checks fails alone; a log write
that fails fails every request of the drain. Retried batches (duplicates) are answered with
their original offsets and not written again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple

from failures.families import StorageError
from ingest import metrics
from ingest.replication.refusals import RecentRefusals
from ingest.unified.producer_appends import PendingAppends
from ingest.unified.producer_types import Verdict
from ingest.unified.unified_log import UnifiedLog
from logformat.errors import TierlogError
from logformat.frame import decode_header


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int


Request = tuple[list[bytearray], asyncio.Future[list[AppendResult]]]
# Per request: (index of its first written frame, a verdict per frame), or why it failed.
_Plan = tuple[int, list[Verdict]] | TierlogError


class GroupCommit:
    def __init__(
        self,
        log: UnifiedLog,
        ensure_leader: Callable[[], None],
        leader_epoch: Callable[[], int],
        appended: Callable[[], None],
        refusals: RecentRefusals,
    ) -> None:
        """`ensure_leader` raises unless this broker may still append; `appended` runs after
        every successful drain (the high watermark may move, followers may be woken);
        `refusals` notes a drain that failed, and answers a sequence gap that follows one
        retriably (replication/refusals.py)."""
        self._log = log
        self._ensure_leader = ensure_leader
        self._leader_epoch = leader_epoch
        self._appended = appended
        self._refusals = refusals
        self._pending: list[Request] = []
        self._draining = False

    def submit(self, frames: list[bytearray]) -> asyncio.Future[list[AppendResult]]:
        """Queue a request's frames; the future gets their offsets once the drain wrote them."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[AppendResult]] = loop.create_future()
        self._pending.append((frames, future))
        if not self._draining:
            self._draining = True
            # Scheduled, not inline: requests parsed in the same loop turn join this write.
            loop.call_soon(self._drain)
        return future

    def fail_all(self, error: TierlogError) -> None:
        """Fail every queued request (leadership moved, the partition is closing)."""
        pending, self._pending = self._pending, []
        _fail(pending, error)

    def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                self._write(batch)
        finally:
            self._draining = False

    def _write(self, batch: list[Request]) -> None:
        """One group commit: sequence checks per request, then one log append for all."""
        try:
            self._ensure_leader()
        except TierlogError as exc:
            _fail(batch, exc)
            return
        pending = self._log.begin_appends()
        plan, to_write = _stage(pending, batch, self._refusals)
        try:
            ranges = self._log.append_as_leader(to_write, pending, self._leader_epoch())
        except Exception as exc:  # every waiting request must get an answer
            _fail(batch, self._refusals.note(_storage_error(exc)))
            return
        metrics.GROUP_COMMIT_FRAMES.observe(len(to_write))
        for item, (_, future) in zip(plan, batch, strict=True):
            if future.done():
                continue
            if isinstance(item, TierlogError):
                future.set_exception(item)
            else:
                future.set_result(_results(item, ranges))
        self._appended()


def _stage(
    pending: PendingAppends, batch: list[Request], refusals: RecentRefusals
) -> tuple[list[_Plan], list[bytearray]]:
    """Check and stage each request's frames; a request that fails is unstaged alone.
    Returns the plan per request and the frames to write (duplicates left out)."""
    plan: list[_Plan] = []
    to_write: list[bytearray] = []
    for request, _ in batch:
        mark = pending.mark()
        try:
            verdicts = [_stage_frame(pending, frame) for frame in request]
        except TierlogError as exc:  # this request only: out of order, fenced epoch…
            pending.rollback(mark)
            plan.append(refusals.explain(exc))
            continue
        plan.append((len(to_write), verdicts))
        to_write += [f for f, v in zip(request, verdicts, strict=True) if not v.duplicate]
    return plan, to_write


def _stage_frame(pending: PendingAppends, frame: bytearray) -> Verdict:
    h = decode_header(frame)
    return pending.check_and_stage(
        h.producer_id, h.producer_epoch, h.base_sequence, h.record_count, h.max_timestamp
    )


def _results(item: tuple[int, list[Verdict]], ranges: list[tuple[int, int]]) -> list[AppendResult]:
    """A request's answer: a retried batch gets its original offsets, nothing appended."""
    i, verdicts = item
    answer = []
    for v in verdicts:
        if v.duplicate:
            answer.append(AppendResult(v.base_offset, v.last_offset))
        else:
            answer.append(AppendResult(*ranges[i]))
            i += 1
    return answer


def _storage_error(exc: Exception) -> TierlogError:
    if isinstance(exc, TierlogError):
        return exc
    return StorageError(f"log write failed: {exc}")


def _fail(batch: list[Request], error: TierlogError) -> None:
    for _, future in batch:
        if not future.done():
            future.set_exception(error)
