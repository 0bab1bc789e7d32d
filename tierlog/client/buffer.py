"""Fetched records waiting for poll(): per partition, in offset order, tagged with the epoch
of the position they were fetched for (a seek or reassignment makes them stale).

Records stay the Arrow rows they arrived as; take() hands out row ranges (RowSlice), which
poll() turns into ConsumerRecords and poll_arrow() into record batches.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from tierlog.client.consumer_records import RecordRows
from tierlog.client.subscription import SubscriptionState
from tierlog.client.types import TopicPartition


class Chunk(NamedTuple):
    epoch: int
    rows: RecordRows  # may be empty: a compacted gap the position moves past
    next_offset: int  # the position once every record of the chunk is handed out


class RowSlice(NamedTuple):
    rows: RecordRows
    start: int
    end: int  # exclusive


class RecordBuffer:
    def __init__(self) -> None:
        self._chunks: dict[TopicPartition, deque[tuple[Chunk, int]]] = {}
        self._rotation = 0

    def add(self, tp: TopicPartition, chunk: Chunk) -> None:
        self._chunks.setdefault(tp, deque()).append((chunk, 0))

    def has(self, tp: TopicPartition) -> bool:
        return bool(self._chunks.get(tp))

    def depth(self, tp: TopicPartition) -> int:
        """How many fetch answers of `tp` wait here."""
        return len(self._chunks.get(tp, ()))

    def end_offset(self, tp: TopicPartition, epoch: int) -> int | None:
        """Where the buffered answers of `tp` fetched at `epoch` end: the next fetch's offset."""
        queue = self._chunks.get(tp)
        if not queue or queue[-1][0].epoch != epoch:
            return None
        return queue[-1][0].next_offset

    def drop(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Forget buffered records of `partitions`, or of all."""
        if partitions is None:
            self._chunks.clear()
            return
        for tp in partitions:
            self._chunks.pop(tp, None)

    def take(self, subscription: SubscriptionState, limit: int) -> list[RowSlice]:
        """Up to `limit` records, partitions taken in turn, advancing positions as it goes."""
        out: list[RowSlice] = []
        tps = [tp for tp, q in self._chunks.items() if q]
        if not tps:
            return out
        self._rotation = (self._rotation + 1) % len(tps)
        left = limit
        for tp in tps[self._rotation :] + tps[: self._rotation]:
            left = self._take_from(tp, subscription, left, out)
            if left <= 0:
                break
        return out

    def _take_from(
        self, tp: TopicPartition, subscription: SubscriptionState, left: int, out: list[RowSlice]
    ) -> int:
        queue = self._chunks[tp]
        if not subscription.is_assigned(tp):
            queue.clear()
        while queue and left > 0:
            chunk, start = queue[0]
            st = subscription.state(tp)
            if chunk.epoch != st.epoch:
                queue.popleft()  # fetched for a position since abandoned
                continue
            if st.paused:
                break
            end = min(chunk.rows.num_rows, start + left)
            if end > start:
                out.append(RowSlice(chunk.rows, start, end))
                left -= end - start
            if end >= chunk.rows.num_rows:
                queue.popleft()
                subscription.advance(tp, chunk.next_offset)
            else:
                queue[0] = (chunk, end)
                subscription.advance(tp, chunk.rows.offsets[end - 1] + 1)
        if not queue:
            self._chunks.pop(tp, None)
        return left
