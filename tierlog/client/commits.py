"""Offset commits of a group consumer: sync, async (callbacks in order, on the poll thread)
and automatic (every auto_commit_interval_ms, from poll(): at-least-once, as in Kafka)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future

from tierlog.client.group import GroupMember
from tierlog.client.iothread import IOThread
from tierlog.client.subscription import Mode, SubscriptionState
from tierlog.client.types import OffsetAndMetadata, TopicPartition

log = logging.getLogger("tierlog.client.consumer")

Offsets = dict[TopicPartition, OffsetAndMetadata]
OffsetsArg = Mapping[TopicPartition, OffsetAndMetadata | int] | None
CommitCallback = Callable[[Offsets, BaseException | None], object]


class Committer:
    def __init__(
        self,
        io: IOThread,
        member: GroupMember,
        subscription: SubscriptionState,
        *,
        auto: bool,
        interval_ms: int,
        timeout_s: float,
    ) -> None:
        self.io = io
        self.member = member
        self.subscription = subscription
        self.auto = auto
        self.interval_s = interval_ms / 1000
        self.timeout_s = timeout_s
        self._next_auto = time.monotonic() + self.interval_s
        self._pending: deque[tuple[Future[None], Offsets, CommitCallback | None]] = deque()

    def offsets(self, offsets: OffsetsArg = None) -> Offsets:
        """`offsets` normalised; by default the positions of everything poll() returned."""
        if offsets is None:
            return {tp: OffsetAndMetadata(o) for tp, o in self.subscription.positions().items()}
        return {
            TopicPartition(*tp): om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om)
            for tp, om in offsets.items()
        }

    @property
    def _as_member(self) -> bool:
        return self.subscription.mode is not Mode.ASSIGNED

    def commit(self, offsets: OffsetsArg = None) -> None:
        self.io.run(self.member.commit(self.offsets(offsets), self._as_member))

    def commit_async(
        self, offsets: OffsetsArg = None, callback: CommitCallback | None = None
    ) -> Future[None]:
        oms = self.offsets(offsets)
        future = self.io.submit(self.member.commit(oms, self._as_member))
        self._pending.append((future, oms, callback))
        return future

    def commit_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """Commit the positions of `partitions` now, if auto-commit is on (before a revoke)."""
        if not self.auto:
            return
        positions = self.subscription.positions()
        oms = {tp: OffsetAndMetadata(positions[tp]) for tp in partitions if tp in positions}
        if oms:
            self.commit(oms)

    def maybe_auto_commit(self) -> None:
        if not self.auto:
            return
        now = time.monotonic()
        if now < self._next_auto:
            return
        self._next_auto = now + self.interval_s
        active = self.member.joined or self.subscription.mode is Mode.ASSIGNED
        if active and self.subscription.positions():
            self.commit_async(callback=_log_failure)

    def fire_callbacks(self, wait: bool = False) -> None:
        """Run the callbacks of finished async commits, oldest first; stop at one still
        running unless `wait`."""
        while self._pending:
            future, offsets, callback = self._pending[0]
            if not future.done():
                if not wait:
                    return
                with contextlib.suppress(Exception):
                    future.result(self.timeout_s)
            self._pending.popleft()
            if callback is None:
                continue
            error = future.exception() if future.done() and not future.cancelled() else None
            try:
                callback(offsets, error)
            except Exception:
                log.exception("commit callback raised")


def _log_failure(offsets: Offsets, error: BaseException | None) -> None:
    if error is not None:
        log.warning("auto-commit of %d offset(s) failed: %s", len(offsets), error)
