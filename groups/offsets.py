"""Committed offsets with lag, and admin resets: the parts of groups that need partition
offsets only brokers know (high watermarks; earliest / latest / by timestamp).

Those come from callables the node that mounts the routes provides (groups/deps.py;
groups/lookups.py has them for brokers and over HTTP), so this module runs the same on
a broker and on a fetch node.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from groups.assignors.base import topic_partitions
from groups.coordinator import GroupCoordinator
from groups.deps import Blocking, HighWatermarks, OffsetResolver, RecordTimestamp
from groups.requests import OffsetEntry, ResetRequest
from logformat.errors import ErrorCode, TierlogError
from metadata.types import CommittedOffset, ConsumerGroupMember, GroupSnapshot, TopicNamePartition

RESOLVE_CONCURRENCY = 16


class OffsetRow(NamedTuple):
    topic: str
    partition: int
    offset: int | None  # None: the group has committed nothing for this partition
    metadata: str | None
    committed_at: datetime | None
    high_watermark: int | None
    lag: int | None  # high watermark - committed offset, when both are known
    # The age of the oldest unconsumed record (now - its timestamp): 0 when caught up, None
    # when unknown (nothing committed, or the leader did not answer).
    lag_ms: int | None = None


class ResetRow(NamedTuple):
    topic: str
    partition: int
    offset: int
    previous: int | None


def live_members(snap: GroupSnapshot) -> list[ConsumerGroupMember]:
    return [m for m in snap.members if m.session_expires_at > snap.now]


async def fresh_snapshot(
    coordinator: GroupCoordinator, run: Blocking, group: str, topics: Sequence[str] = ()
) -> GroupSnapshot | None:
    """The group, after removing members whose session lapsed (any access expires them)."""
    snap: GroupSnapshot | None = await run(coordinator.repo.read, group, topics)
    if snap is not None and len(live_members(snap)) != len(snap.members):
        await run(coordinator.expire, group)
        snap = await run(coordinator.repo.read, group, topics)
    return snap


async def offsets_with_lag(
    coordinator: GroupCoordinator,
    run: Blocking,
    high_watermarks: HighWatermarks,
    group: str,
    topics: Sequence[str] | None = None,
) -> list[OffsetRow]:
    """Committed offsets of the group, plus every partition of the topics its live members
    subscribe to (or of ``topics``, when given) with ``offset`` None where nothing is
    committed, so a consumer can tell "start per auto.offset.reset" from an offset."""
    snap = await fresh_snapshot(coordinator, run, group, topics or ())
    committed: list[CommittedOffset] = await run(coordinator.repo.offsets, group) or []
    if topics is not None:
        committed = [c for c in committed if c.topic in topics]
        wanted = set(topics)
    else:
        wanted = {t for m in (snap.members if snap else []) for t in m.topics}
    metas = snap.topics if snap is not None else await run(coordinator.repo.topics, wanted)
    known = {TopicNamePartition(c.topic, c.partition): c for c in committed}
    partitions = set(known)
    for name in wanted & set(metas):
        partitions.update(topic_partitions(name, metas[name].partitions))
    ordered = sorted(partitions)
    hws = await high_watermarks(ordered) if ordered else {}
    rows = []
    for tp in ordered:
        c = known.get(tp)
        hw = hws.get(tp)
        lag = max(0, hw - c.offset) if c is not None and hw is not None else None
        rows.append(
            OffsetRow(
                tp.topic,
                tp.partition,
                c.offset if c else None,
                c.metadata if c else None,
                c.committed_at if c else None,
                hw,
                lag,
            )
        )
    return rows


async def with_time_lag(
    rows: Sequence[OffsetRow], record_timestamp: RecordTimestamp, now_ms: int | None = None
) -> list[OffsetRow]:
    """The rows with lag in time: for each lagging partition, the age of the record at the
    committed offset (the oldest one the group has not consumed), read from the log."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    gate = asyncio.Semaphore(RESOLVE_CONCURRENCY)

    async def one(r: OffsetRow) -> OffsetRow:
        if r.lag is None or r.offset is None:
            return r
        if r.lag == 0:
            return r._replace(lag_ms=0)
        async with gate:
            ts = await record_timestamp(TopicNamePartition(r.topic, r.partition), r.offset)
        return r._replace(lag_ms=None if ts is None else max(0, now - ts))

    return list(await asyncio.gather(*(one(r) for r in rows)))


async def _resolve_all(
    resolve: OffsetResolver, partitions: Sequence[TopicNamePartition], at: str | int
) -> list[int]:
    gate = asyncio.Semaphore(RESOLVE_CONCURRENCY)

    async def one(tp: TopicNamePartition) -> int:
        async with gate:
            offset = await resolve(tp, at)
            if offset is None and not isinstance(at, str):
                offset = await resolve(tp, "latest")  # every record is older: the end, as Kafka
        if offset is None:
            raise TierlogError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"no {at} offset for {tp.topic}-{tp.partition}"
            )
        return offset

    return list(await asyncio.gather(*(one(tp) for tp in partitions)))


async def plan_reset(
    coordinator: GroupCoordinator,
    run: Blocking,
    resolve: OffsetResolver,
    group: str,
    req: ResetRequest,
) -> list[ResetRow]:
    """The offsets a reset writes. Scope: the partitions named, all partitions of the topics
    named, or else every partition the group has committed offsets for."""
    committed: list[CommittedOffset] = await run(coordinator.repo.offsets, group) or []
    previous = {TopicNamePartition(c.topic, c.partition): c.offset for c in committed}
    if req.at is None:
        entries = await _clamped(coordinator, run, resolve, req.offsets)
    else:
        scope: set[TopicNamePartition] = set(req.scope or ())
        if req.topics is not None:
            metas = await run(coordinator.repo.topics, req.topics)
            for name in req.topics:
                if name not in metas:
                    raise TierlogError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}"
                    )
                scope.update(topic_partitions(name, metas[name].partitions))
        if req.scope is None and req.topics is None:
            scope = set(previous)
        ordered = sorted(scope)
        await _check_partitions(coordinator, run, ordered)
        offsets = await _resolve_all(resolve, ordered, req.at)
        entries = tuple(
            OffsetEntry(tp.topic, tp.partition, o, None)
            for tp, o in zip(ordered, offsets, strict=True)
        )
    return [
        ResetRow(
            e.topic, e.partition, e.offset, previous.get(TopicNamePartition(e.topic, e.partition))
        )
        for e in entries
    ]


async def _clamped(
    coordinator: GroupCoordinator,
    run: Blocking,
    resolve: OffsetResolver,
    entries: Sequence[OffsetEntry],
) -> tuple[OffsetEntry, ...]:
    """Explicit reset offsets, clamped into [log start, log end] as Kafka's reset tool does:
    an offset outside the log would only send consumers to auto.offset.reset later."""
    partitions = [TopicNamePartition(e.topic, e.partition) for e in entries]
    await _check_partitions(coordinator, run, partitions)
    lows = await _resolve_all(resolve, partitions, "earliest")
    highs = await _resolve_all(resolve, partitions, "latest")
    return tuple(
        e._replace(offset=min(max(e.offset, lo), hi))
        for e, lo, hi in zip(entries, lows, highs, strict=True)
    )


async def _check_partitions(
    coordinator: GroupCoordinator, run: Blocking, partitions: Sequence[TopicNamePartition]
) -> None:
    metas = await run(coordinator.repo.topics, {tp.topic for tp in partitions})
    for tp in partitions:
        meta = metas.get(tp.topic)
        if meta is None or tp.partition >= meta.partitions:
            raise TierlogError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {tp.topic}-{tp.partition}"
            )
