"""What becomes of fetch answers (Kafka's FetchCollector): records go to the buffer, an
out-of-range position is reset, and a partition whose fetch failed waits out its backoff."""

from __future__ import annotations

import logging
import time
from dataclasses import KW_ONLY, dataclass, field

from tierlog.client.buffer import Chunk, RecordBuffer
from tierlog.client.errors import OffsetOutOfRange
from tierlog.client.fetcher import FetchedRecords, FetchRequest
from tierlog.client.subscription import SubscriptionState
from tierlog.client.types import TopicPartition

log = logging.getLogger("tierlog.client.consumer")


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
        """A fetch for every partition with a position, nothing buffered and no backoff."""
        now = time.monotonic()
        return [
            FetchRequest(tp, pos, epoch)
            for tp, pos, epoch in self.subscription.fetchable()
            if not self.buffer.has(tp) and self._retry_at.get(tp, 0.0) <= now
        ]

    def collect(self, result: FetchedRecords) -> None:
        """Apply one answer, unless a seek or a rebalance made it stale; raises an error
        the consumer cannot get past (OffsetOutOfRange with no reset, a fatal ApiError)."""
        tp = result.request.tp
        if not self.subscription.is_assigned(tp):
            return
        st = self.subscription.state(tp)
        if result.request.epoch != st.epoch or result.request.offset != st.position:
            return  # asked for a position since abandoned
        if result.error is not None:
            self._failed(result)
            return
        self._retry_at.pop(tp, None)
        st.high_watermark = result.high_watermark
        st.log_start_offset = result.log_start_offset
        if result.records:
            self.buffer.add(tp, Chunk(st.epoch, result.records, result.next_offset))
        elif result.next_offset > result.request.offset:
            self.subscription.advance(tp, result.next_offset)  # past a compacted gap

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
