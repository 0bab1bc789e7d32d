"""Fetched records waiting for poll(): per partition, in offset order, tagged with the epoch
of the position they were fetched for (a seek or reassignment makes them stale)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from tierlog.client.subscription import SubscriptionState
from tierlog.client.types import ConsumerRecord, TopicPartition


class Chunk(NamedTuple):
    epoch: int
    records: list[ConsumerRecord]
    next_offset: int  # the position once every record of the chunk is handed out


class RecordBuffer:
    def __init__(self) -> None:
        self._chunks: dict[TopicPartition, deque[tuple[Chunk, int]]] = {}
        self._rotation = 0

    def add(self, tp: TopicPartition, chunk: Chunk) -> None:
        self._chunks.setdefault(tp, deque()).append((chunk, 0))

    def has(self, tp: TopicPartition) -> bool:
        return bool(self._chunks.get(tp))

    def drop(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Forget buffered records of `partitions`, or of all."""
        if partitions is None:
            self._chunks.clear()
            return
        for tp in partitions:
            self._chunks.pop(tp, None)

    def drain(self, subscription: SubscriptionState, limit: int) -> list[ConsumerRecord]:
        """Up to `limit` records, partitions taken in turn, advancing positions as it goes."""
        out: list[ConsumerRecord] = []
        tps = [tp for tp, q in self._chunks.items() if q]
        if not tps:
            return out
        self._rotation = (self._rotation + 1) % len(tps)
        for tp in tps[self._rotation :] + tps[: self._rotation]:
            queue = self._chunks[tp]
            while queue and len(out) < limit:
                chunk, start = queue[0]
                if not subscription.is_assigned(tp):
                    queue.clear()
                    break
                st = subscription.state(tp)
                if chunk.epoch != st.epoch or st.paused:
                    if chunk.epoch != st.epoch:
                        queue.popleft()  # fetched for a position since abandoned
                        continue
                    break
                take = chunk.records[start : start + (limit - len(out))]
                out.extend(take)
                end = start + len(take)
                if end >= len(chunk.records):
                    queue.popleft()
                    subscription.advance(tp, chunk.next_offset)
                else:
                    queue[0] = (chunk, end)
                    subscription.advance(tp, take[-1].offset + 1)
            if not queue:
                self._chunks.pop(tp, None)
            if len(out) >= limit:
                break
        return out
