"""Where a consumer starts reading: committed offsets first (in a group), else the reset
strategy (earliest, latest, or none → NoOffsetForPartition); and offset lookups by time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass

from tierlog.client.errors import NoOffsetForPartition
from tierlog.client.group import GroupMember
from tierlog.client.http import AsyncHttp
from tierlog.client.iothread import IOThread
from tierlog.client.metadata import ClusterMetadata
from tierlog.client.offsets import list_offsets, offset_for_time
from tierlog.client.subscription import SubscriptionState
from tierlog.client.types import OffsetAndTimestamp, TopicPartition


@dataclass(eq=False)
class Positions:
    io: IOThread
    http: AsyncHttp
    metadata: ClusterMetadata
    subscription: SubscriptionState
    member: GroupMember | None
    _: KW_ONLY
    default_reset: str
    timeout_s: float

    def resolve(self) -> None:
        """Give every assigned partition without a position one."""
        sub = self.subscription
        missing = sub.missing_positions()
        if not missing:
            return
        if self.member is not None:
            ask = [tp for tp in missing if sub.state(tp).reset is None]
            if ask:
                for tp, om in self.io.run(self.member.committed(ask)).items():
                    if om is not None and sub.is_assigned(tp) and sub.state(tp).position is None:
                        sub.seek(tp, om.offset)
        by_strategy: dict[str, list[TopicPartition]] = {}
        for tp in sub.missing_positions():
            strategy = sub.state(tp).reset or self.default_reset
            by_strategy.setdefault(strategy, []).append(tp)
        if "none" in by_strategy:
            raise NoOffsetForPartition(by_strategy["none"])
        for strategy, tps in by_strategy.items():
            for tp, offset in self.list(tps, strategy).items():
                if offset is not None and sub.state(tp).position is None:
                    sub.seek(tp, offset)

    def list(
        self, tps: Iterable[TopicPartition], at: str | int
    ) -> dict[TopicPartition, int | None]:
        return self.io.run(list_offsets(self.http, self.metadata, tps, at, self.timeout_s))

    def for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        deadline = time.monotonic() + self.timeout_s
        tps = [TopicPartition(*tp) for tp in timestamps]

        async def lookup() -> list[OffsetAndTimestamp | None]:
            return await asyncio.gather(
                *(
                    offset_for_time(self.http, self.metadata, tp, int(timestamps[tp]), deadline)
                    for tp in tps
                )
            )

        return dict(zip(tps, self.io.run(lookup()), strict=True))
