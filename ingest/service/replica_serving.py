"""What this broker serves other nodes over the cluster-internal routes (ingest/api/
internal.py): the leader side of replica fetches, the committed sealed segments the
tiering worker downloads, and single frames a peer puts back in place of a corrupt copy
(ingest/replication/frame_repair.py), each frame checked before a byte is sent."""

from __future__ import annotations

import asyncio
import hmac
import os
from typing import TYPE_CHECKING, NamedTuple

from ingest.log.log_read import CorruptLogError
from ingest.replication import corruption
from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicNamePartition

if TYPE_CHECKING:
    from ingest.broker import Broker


class SegmentFile(NamedTuple):
    fd: int  # our own descriptor: local retention may unlink the file while it is sent
    base_offset: int
    next_offset: int
    size: int


class ReplicaServing:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def require_cluster(self, token: str) -> None:
        """Internal routes take the cluster credential, which clients never have."""
        secret = self._broker.cluster_secret
        if not secret or not hmac.compare_digest(token, secret):
            raise TierlogError(
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "internal endpoints need the cluster credential",
            )

    async def replica_fetch(self, body: bytes) -> bytes:
        """A follower's fetch, answered by the partitions this broker leads."""
        return await self._broker.fetch_handler.handle(body)

    async def open_segment(
        self, topic: str, partition: int, base: int, end: int | None
    ) -> SegmentFile:
        """The committed sealed segment at `base` of a replica hosted here (leader or
        follower), opened once its frames all pass their CRC check; `end`, when given,
        must be its end (a replica whose boundaries differ has no such segment)."""
        broker = self._broker
        me = broker.config.broker_id
        state = broker.partitions.get(TopicNamePartition(topic, partition))
        if state is None:
            raise TierlogError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"broker {me} hosts no replica of {topic}-{partition}",
            )
        hw = state.high_watermark
        found = next(
            (
                s
                for s in state.log.segments()
                if s.base_offset == base and s.sealed and s.next_offset <= hw
            ),
            None,
        )
        if found is None or (end is not None and end != found.next_offset):
            raise TierlogError(
                ErrorCode.NOT_FOUND,
                f"broker {me} has no committed sealed segment {base} of {topic}-{partition}"
                + (f" ending at {end}" if end is not None else ""),
            )
        try:
            fd = await asyncio.to_thread(os.open, found.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise TierlogError(
                ErrorCode.NOT_FOUND, f"segment {base} of {topic}-{partition} was just deleted"
            ) from None
        try:  # one CRC per frame before anything is sent: a corrupt copy is never handed out
            bad = await asyncio.to_thread(corruption.check_segment, fd, found.size, base)
        except BaseException:
            os.close(fd)
            raise
        if bad is not None:
            os.close(fd)
            raise corruption.segment_error(state, base, bad)
        return SegmentFile(fd, found.base_offset, found.next_offset, found.size)

    async def frame(self, topic: str, topic_id: str, partition: int, offset: int) -> bytes:
        """The whole frame starting at `offset` of a replica hosted here (leader or
        follower, committed or not: the asking peer checks it is the frame it lacks), once
        it passes its CRC check. A corrupt copy here is reported (and repaired) like any."""
        broker = self._broker
        me = broker.config.broker_id
        state = broker.partitions.get(TopicNamePartition(topic, partition))
        if state is None or state.topic_id != topic_id:
            raise TierlogError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"broker {me} hosts no replica of {topic}-{partition} ({topic_id})",
            )
        try:
            frames = await asyncio.to_thread(state.log.read, offset, 1)
        except CorruptLogError as exc:
            corruption.report(state, exc)
            raise
        if not frames or frames[0][0].base_offset != offset:
            raise TierlogError(
                ErrorCode.NOT_FOUND,
                f"no frame of broker {me}'s {topic}-{partition} starts at offset {offset}",
            )
        return bytes(frames[0][1])
