"""What becomes of fetch answers (Kafka's FetchCollector): records go to the buffer, an
out-of-range position is reset, and a partition whose fetch failed waits out its backoff.

Which fetches to send: one per partition whose buffered answers are fewer than PREFETCH, from
where they end, so the next answer is on its way while the application works through the
current one."""

from __future__ import annotations

import logging
import time
from dataclasses import KW_ONLY, dataclass, field

from tierlog.client.buffer import Chunk, RecordBuffer
from tierlog.client.consumer_records import empty_rows
from tierlog.client.errors import OffsetOutOfRange
from tierlog.client.fetcher import FetchedRecords, FetchRequest
from tierlog.client.subscription import SubscriptionState
from tierlog.client.types import TopicPartition

log = logging.getLogger("tierlog.client.consumer")

PREFETCH = 2  # fetch answers buffered per partition, the one being handed out included


@dataclass(eq=False)
class FetchCollector:
    subscription: SubscriptionState
    buffer: RecordBuffer
    _: KW_ONLY
    auto_offset_reset: str
    retry_backoff_s: float
    # When a partition whose last fetch failed may be fetched again.
    _retry_at: dict[TopicPartition, float] = field(default_factory=dict, init=False)

    def requests(self) -> list[FetchRequest]:
        """A fetch for every partition with a position, room in the buffer and no backoff."""
        now = time.monotonic()
        buffer = self.buffer
        return [
            FetchRequest(tp, self._fetch_offset(tp, pos, epoch), epoch)
            for tp, pos, epoch in self.subscription.fetchable()
            if buffer.depth(tp) < PREFETCH and self._retry_at.get(tp, 0.0) <= now
        ]

    def _fetch_offset(self, tp: TopicPartition, position: int, epoch: int) -> int:
        end = self.buffer.end_offset(tp, epoch)
        return position if end is None else end

    def collect(self, result: FetchedRecords) -> None:
        """Apply one answer, unless a seek or a rebalance made it stale; raises an error
        the consumer cannot get past (OffsetOutOfRange with no reset, a fatal ApiError)."""
        tp = result.request.tp
        if not self.subscription.is_assigned(tp):
            return
        st = self.subscription.state(tp)
        req = result.request
        if st.position is None or req.epoch != st.epoch:
            return  # asked for a position since abandoned
        if req.offset != self._fetch_offset(tp, st.position, st.epoch):
            return  # not where the buffered answers end (they were dropped, or handed out)
        if result.error is not None:
            if req.offset != st.position:
                # A prefetch: its error counts once the application gets there.
                self._retry_at[tp] = time.monotonic() + self.retry_backoff_s
            else:
                self._failed(result)
            return
        self._retry_at.pop(tp, None)
        st.high_watermark = result.high_watermark
        st.log_start_offset = result.log_start_offset
        if result.rows is not None:
            self.buffer.add(tp, Chunk(st.epoch, result.rows, result.next_offset))
        elif result.next_offset > req.offset:
            if self.buffer.has(tp):  # past a compacted gap, once what is before it is out
                self.buffer.add(tp, Chunk(st.epoch, empty_rows(tp), result.next_offset))
            else:
                self.subscription.advance(tp, result.next_offset)

    def _failed(self, result: FetchedRecords) -> None:
        tp, error = result.request.tp, result.error
        assert error is not None
        if error.name == "OFFSET_OUT_OF_RANGE":
            strategy = self.auto_offset_reset
            if strategy == "none":
                raise OffsetOutOfRange({tp: result.request.offset})
            log.info(
                "%s: offset %d out of range, resetting to %s", tp, result.request.offset, strategy
            )
            self.subscription.request_reset(tp, strategy)
        elif error.retriable or error.stale_metadata:
            wait = max(self.retry_backoff_s, error.retry_after_s)  # the server's 429/503 wait
            self._retry_at[tp] = time.monotonic() + wait
        else:
            raise error
