"""A hosted partition: its log, the group-commit appender, the high watermark, fetch waiters.

Concurrent produce requests to one partition are coalesced: each request queues its frames,
and one drain writes everything queued so far with a single log append (one os.write and
one index batch), then wakes the requests and any long-polling fetches.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import NamedTuple

from ingest import metrics
from ingest.partition_log import PartitionLog
from logformat.errors import ErrorCode, TierlogError


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int


class PartitionState:
    def __init__(self, topic: str, partition: int, log: PartitionLog, leader_epoch: int) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.leader_epoch = leader_epoch
        # One broker per partition in this release: everything appended is committed.
        self.high_watermark = log.log_end_offset
        self._pending: list[tuple[list[bytearray], asyncio.Future[list[AppendResult]]]] = []
        self._draining = False
        self._data_arrived = asyncio.Event()
        self._closed = False
        self._labels = (topic, str(partition))
        self._publish_offsets()

    async def append(self, frames: list[bytearray]) -> list[AppendResult]:
        """Append frames (base offsets are assigned here); resolves once they are written."""
        if self._closed:
            raise TierlogError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"partition {self.topic}-{self.partition} is no longer hosted here",
            )
        future: asyncio.Future[list[AppendResult]] = asyncio.get_running_loop().create_future()
        self._pending.append((frames, future))
        if not self._draining:
            self._draining = True
            # A task, not an inline call: requests parsed in the same loop turn join this write.
            asyncio.get_running_loop().call_soon(self._drain)
        return await future

    def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                frames = [frame for request, _ in batch for frame in request]
                try:
                    ranges = self.log.append(frames, self.leader_epoch, int(time.time() * 1000))
                except Exception as exc:  # every waiting request must get an answer
                    error = (
                        exc
                        if isinstance(exc, TierlogError)
                        else TierlogError(ErrorCode.KAFKA_STORAGE_ERROR, f"log write failed: {exc}")
                    )
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    continue
                metrics.GROUP_COMMIT_FRAMES.observe(len(frames))
                self.high_watermark = self.log.log_end_offset
                start = 0
                for request, future in batch:
                    end = start + len(request)
                    if not future.done():
                        future.set_result([AppendResult(b, e) for b, e in ranges[start:end]])
                    start = end
                self._publish_offsets()
                self._wake_fetchers()
        finally:
            self._draining = False

    async def wait_for_data(self, offset: int, timeout_s: float) -> None:
        """Return once the high watermark passes `offset`, or after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while self.high_watermark <= offset and not self._closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            event = self._data_arrived
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                return

    def _wake_fetchers(self) -> None:
        # Swap in a fresh event so waiters that wake re-check without a lost-wakeup window.
        event, self._data_arrived = self._data_arrived, asyncio.Event()
        event.set()

    def _publish_offsets(self) -> None:
        metrics.LOG_END_OFFSET.labels(*self._labels).set(self.log.log_end_offset)
        metrics.HIGH_WATERMARK.labels(*self._labels).set(self.high_watermark)
        metrics.LOG_START_OFFSET.labels(*self._labels).set(self.log.log_start_offset)

    def close(self) -> None:
        self._closed = True
        self._wake_fetchers()
        for labels_metric in (
            metrics.LOG_END_OFFSET,
            metrics.HIGH_WATERMARK,
            metrics.LOG_START_OFFSET,
        ):
            with contextlib.suppress(KeyError):
                labels_metric.remove(*self._labels)
