"""The leader's side of replication: answer followers' fetches (fencing, divergence, data).

A fetch carries the follower's view of the leader epoch (stale → FENCED_LEADER_EPOCH, ahead
→ UNKNOWN_LEADER_EPOCH) and the epoch of its last frame; if that epoch ends earlier on the
leader, the follower is told where to truncate before it may fetch (KIP-101/279/320).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from ingest.log.log_read import CorruptLogError
from ingest.replication import corruption
from ingest.replication.partition import Partition, Role
from ingest.replication.wire import (
    FetchPartition,
    PartitionReply,
    decode_request,
    encode_response,
)
from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicNamePartition

_WAITING = (None, ErrorCode.KAFKA_STORAGE_ERROR.value)


def _reply(
    p: FetchPartition,
    state: Partition | None,
    error: ErrorCode | None = None,
    message: str | None = None,
    diverging: tuple[int, int] = (-1, -1),
    length: int = 0,
) -> PartitionReply:
    log = state.log if state is not None else None
    return PartitionReply(
        topic=p.topic,
        partition=p.partition,
        error_code=error.value if error else None,
        message=message,
        high_watermark=state.high_watermark if state else -1,
        log_start_offset=log.log_start_offset if log else -1,
        log_end_offset=log.log_end_offset if log else -1,
        leader_epoch=state.leader_epoch if state else -1,
        diverging_epoch=diverging[0],
        diverging_end_offset=diverging[1],
        length=length,
    )


class ReplicaFetchHandler:
    def __init__(
        self,
        partitions: Callable[[], dict[TopicNamePartition, Partition]],
        on_isr_expand: Callable[[Partition, list[int]], None],
    ) -> None:
        self.partitions = partitions  # the partitions this broker hosts now
        self.on_isr_expand = on_isr_expand
        self._appended = asyncio.Event()

    def notify_append(self) -> None:
        event, self._appended = self._appended, asyncio.Event()
        event.set()

    async def handle(self, body: bytes) -> bytes:
        try:
            replica, max_wait_ms, max_bytes, parts = decode_request(body)
        except (ValueError, KeyError, TypeError) as exc:
            raise TierlogError(ErrorCode.INVALID_REQUEST, f"bad replica fetch: {exc}") from None
        waiter = self._appended
        replies, payloads = self._serve(replica, parts, max_bytes)
        # A storage error (a corrupt frame the follower needs) waits like an idle answer, so
        # the follower asks again at the long-poll pace rather than in a tight loop.
        idle = all(
            r.length == 0 and r.error_code in _WAITING and r.diverging_epoch < 0 for r in replies
        )
        if idle and max_wait_ms > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(max_wait_ms, 5000) / 1000):  # no task made
                    await waiter.wait()
            replies, payloads = self._serve(replica, parts, max_bytes)
        return encode_response(replies, payloads)

    def _serve(
        self, replica: int, parts: list[FetchPartition], max_bytes: int
    ) -> tuple[list[PartitionReply], list[bytes]]:
        replies: list[PartitionReply] = []
        payloads: list[bytes] = []
        budget = max_bytes
        for p in parts:
            reply, data = self._serve_one(replica, p, budget)
            budget = max(0, budget - len(data))
            replies.append(reply)
            payloads.append(data)
        return replies, payloads

    def _serve_one(
        self, replica: int, p: FetchPartition, budget: int
    ) -> tuple[PartitionReply, bytes]:
        state = self.partitions().get(TopicNamePartition(p.topic, p.partition))
        if state is None or state.topic_id != p.topic_id or state.role is not Role.LEADER:
            return _reply(p, None, ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader"), b""
        if p.leader_epoch < state.leader_epoch:
            return _reply(p, state, ErrorCode.FENCED_LEADER_EPOCH, "stale leader epoch"), b""
        if p.leader_epoch > state.leader_epoch:
            return _reply(p, state, ErrorCode.UNKNOWN_LEADER_EPOCH, "leader epoch ahead"), b""
        log = state.log
        if p.last_fetched_epoch >= 0:
            found = log.end_offset_for_epoch(p.last_fetched_epoch)
            epoch, end = found if found is not None else (-1, log.log_start_offset)
            if end < p.fetch_offset or epoch < p.last_fetched_epoch:
                return _reply(p, state, diverging=(epoch, end)), b""
        if not log.log_start_offset <= p.fetch_offset <= log.log_end_offset:
            return _reply(p, state, ErrorCode.OFFSET_OUT_OF_RANGE, "fetch offset out of range"), b""
        state.record_follower_fetch(replica, p.fetch_offset)
        expansion = state.isr_expansion(replica)
        if expansion is not None:
            self.on_isr_expand(state, expansion)
        data = b""
        if p.fetch_offset < log.log_end_offset and budget > 0:
            try:  # CRC-checked frames only: a follower must never append a corrupt one
                frames = log.read(p.fetch_offset, budget)
            except CorruptLogError as exc:
                corruption.report(state, exc)
                return _reply(p, state, exc.code, exc.message), b""
            except TierlogError as exc:  # e.g. the log went offline: this partition only
                return _reply(p, state, exc.code, exc.message), b""
            data = b"".join(view for _, view in frames)
        return _reply(p, state, length=len(data)), data
