"""What a consumer reads: its subscription or manual assignment, and a position per partition.

Owned by the thread that calls poll(); the I/O loop never touches it. Every seek bumps the
partition's `epoch`, so a fetch answer requested before the seek is recognised and dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from tierlog.client.types import TopicPartition


class Mode(Enum):
    NONE = "none"
    SUBSCRIBED = "subscribed"  # a group assigns partitions
    ASSIGNED = "assigned"  # the application chose them


@dataclass
class TopicPartitionState:
    position: int | None = None  # offset of the next record to return
    reset: str | None = None  # "earliest"/"latest" asked by seek_to_*; None: committed first
    high_watermark: int | None = None
    log_start_offset: int | None = None
    epoch: int = 0
    paused: bool = False


class SubscriptionState:
    def __init__(self) -> None:
        self.mode = Mode.NONE
        self.topics: tuple[str, ...] = ()
        self._parts: dict[TopicPartition, TopicPartitionState] = {}

    # --- what is read ---
    def subscribe(self, topics: Iterable[str]) -> None:
        if self.mode is Mode.ASSIGNED:
            raise ValueError("subscribe() after assign(): call unsubscribe() first")
        names = tuple(dict.fromkeys(topics))
        if not names or not all(isinstance(t, str) and t for t in names):
            raise ValueError("subscribe() needs topic names")
        self.mode = Mode.SUBSCRIBED
        self.topics = names

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        if self.mode is Mode.SUBSCRIBED:
            raise ValueError("assign() after subscribe(): call unsubscribe() first")
        wanted = [TopicPartition(*tp) for tp in partitions]
        self.mode = Mode.ASSIGNED if wanted else Mode.NONE
        self.topics = tuple(dict.fromkeys(tp.topic for tp in wanted))
        self.remove([tp for tp in self._parts if tp not in wanted])
        self.add(wanted)

    def unsubscribe(self) -> None:
        self.mode = Mode.NONE
        self.topics = ()
        self._parts.clear()

    def add(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._parts.setdefault(tp, TopicPartitionState())

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._parts.pop(tp, None)

    @property
    def assigned(self) -> list[TopicPartition]:
        return list(self._parts)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._parts

    def state(self, tp: TopicPartition) -> TopicPartitionState:
        st = self._parts.get(tp)
        if st is None:
            raise ValueError(f"{tp} is not assigned to this consumer")
        return st

    # --- positions ---
    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"offsets are >= 0, got {offset}")
        st = self.state(tp)
        st.position, st.reset = offset, None
        st.epoch += 1

    def request_reset(self, tp: TopicPartition, strategy: str | None) -> None:
        """Forget the position; the next poll looks it up (`strategy`, or committed first)."""
        st = self.state(tp)
        st.position, st.reset = None, strategy
        st.epoch += 1

    def advance(self, tp: TopicPartition, offset: int) -> None:
        """Records were handed out up to `offset` (exclusive): no epoch change."""
        self.state(tp).position = offset

    def missing_positions(self) -> list[TopicPartition]:
        return [tp for tp, st in self._parts.items() if st.position is None]

    def fetchable(self) -> list[tuple[TopicPartition, int, int]]:
        """(partition, position, epoch) of every partition ready to fetch."""
        return [
            (tp, st.position, st.epoch)
            for tp, st in self._parts.items()
            if st.position is not None and not st.paused
        ]

    def positions(self) -> dict[TopicPartition, int]:
        return {tp: st.position for tp, st in self._parts.items() if st.position is not None}
