"""Fetch and ListOffsets over the broker's tiered read path (ingest/tiered/tiered_fetch.py).

Offsets below the hot log's start are read from the cold tier (S3) exactly as HTTP fetches
are; the consumer cannot tell the tiers apart. A fetch long-polls: it answers once min_bytes
have arrived across its partitions or max_wait has passed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import NamedTuple

import pyarrow as pa
from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest
from kio.schema.fetch.v12.response import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest
from kio.schema.list_offsets.v7.response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)

from cluster.read_contract import FetchResult
from ingest.kafka import leader_epochs
from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.leader_epochs import UNDEFINED, EpochEnd
from ingest.kafka.offload import offload
from ingest.kafka.protocol import build, kafka_error, nested
from ingest.kafka.record_batch import encode_batch, encode_control
from ingest.service.fetch_rules import ResponseBudget, merged
from ingest.service.partitions import Partition, log_start
from ingest.service.reads import Reads
from ingest.service.txn_partition import TxnView
from logformat.errors import ErrorCode, TierlogError
from logformat.txn_rows import marker_rows

log = logging.getLogger("tierlog.kafka")

LATEST, EARLIEST = -1, -2
READ_COMMITTED = 1  # isolation_level
RECORD_TIME_BYTES = 1 << 20  # enough for the one record whose time ListOffsets answers
_MAX_RECORDS = 100_000  # per partition and fetch; max bytes normally ends a read first
_INLINE_BYTES = 256 * 1024  # records encoded on the event loop below this, in a thread above
_SLICE_BYTES = 4 * 1024 * 1024  # a partition's read, a slice at a time (the loop runs between)


class _Read(NamedTuple):
    error: KafkaError
    records: bytes = b""
    high_watermark: int = -1
    log_start: int = -1
    diverging: EpochEnd = UNDEFINED  # KIP-320: where the consumer's last epoch ended
    stable: int = -1  # the last stable offset (-1: the high watermark)


async def leader(ctx: KafkaContext, topic: str, partition: int, operation: str) -> Partition:
    return await ctx.services.reads.leader(ctx.principal, topic, partition, operation)


def _encoded(
    got: FetchResult,
    fetch_offset: int,
    append_time: bool,
    epoch: int,
    marker: pa.RecordBatch | None = None,
) -> bytes:
    if marker is None:
        return encode_batch(got.batch, fetch_offset, got.next_offset, append_time, epoch)
    at = marker.column(0)[0].as_py()
    return encode_batch(got.batch, fetch_offset, at, append_time, epoch) + encode_control(
        marker, epoch
    )


def _last_marker(read: FetchResult, answered: FetchResult) -> pa.RecordBatch | None:
    """The transaction marker the answer ends on, when the transaction view left it out
    (with whatever it hid before it): sent as a control batch, so clients move past it."""
    last = answered.next_offset - 1
    kept = answered.batch.column(0)
    if read.batch.num_rows == 0 or (len(kept) and kept[len(kept) - 1].as_py() >= last):
        return None
    offsets = read.batch.column(0).to_numpy()
    at = int(offsets.searchsorted(last))
    if at >= len(offsets) or offsets[at] != last:
        return None
    row = read.batch.slice(at, 1)
    return row if bool(marker_rows(row)[0]) else None


class _Slicer:
    """One partition's records, read and encoded a slice (_SLICE_BYTES) at a time: between
    slices the event loop is free, and batches past _INLINE_BYTES are encoded in a worker
    thread. Each slice is one batch with its leader epoch."""

    def __init__(self, reads: Reads, state: Partition, append_time: bool, txns: TxnView) -> None:
        self.reads, self.state, self.append_time, self.txns = reads, state, append_time, txns

    async def _slice(self, offset: int, max_bytes: int) -> tuple[bytes, FetchResult]:
        epoch, epoch_end = leader_epochs.epoch_at(self.state, offset)
        read: list[FetchResult] = []

        def trim(got: FetchResult) -> FetchResult:
            read.append(leader_epochs.within_epoch(got, epoch_end))  # before the txn view
            return read[-1]

        limit = min(max_bytes, _SLICE_BYTES)
        got = await self.reads.fetch(
            self.state, offset, _MAX_RECORDS, limit, trim=trim, txns=self.txns
        )
        marker = _last_marker(read[0], got) if read and self.txns.transactional else None
        args = (got, offset, self.append_time, epoch, marker)
        if got.batch.nbytes >= _INLINE_BYTES:  # encoding walks every record
            return await offload(_encoded, *args), got
        return _encoded(*args), got

    async def read(self, offset: int, max_bytes: int) -> _Read:
        """From `offset`, up to `max_bytes` (the last batch may pass it, as in Kafka)."""
        data, got = await self._slice(offset, max_bytes)
        parts, left = [data], max_bytes - len(data)
        while data and left > 0 and got.next_offset < min(got.high_watermark, self.txns.stable):
            try:
                data, more = await self._slice(got.next_offset, left)
            except TierlogError:  # e.g. retention raced the read: answer what was read
                break
            parts.append(data)
            left -= len(data)
            got = more
        hw = got.high_watermark
        stable = min(self.txns.stable, hw)
        return _Read(KafkaError.none, b"".join(parts), hw, got.log_start_offset, stable=stable)


async def _read(
    ctx: KafkaContext,
    topic: str,
    p: FetchPartition,
    max_bytes: int,
    append_time: bool,
    committed: bool,
) -> _Read:
    """One partition's answer; `max_bytes` 0: the response's budget is spent, so only its
    watermarks (ingest/service/fetch_rules.py)."""
    try:
        state = await leader(ctx, topic, p.partition, "read")
        fenced = leader_epochs.fence(state, getattr(p, "current_leader_epoch", -1))
        if fenced is not None:
            return _Read(fenced)
        last_epoch = getattr(p, "last_fetched_epoch", -1)
        diverged = leader_epochs.diverging(state, last_epoch, p.fetch_offset)
        if diverged is not None:
            return _Read(KafkaError.none, high_watermark=state.high_watermark, diverging=diverged)
        if max_bytes <= 0:
            return _Read(KafkaError.none, b"", state.high_watermark, log_start(state))
        reads = ctx.services.reads
        txns = await reads.txn_view(state, committed)
        return await _Slicer(reads, state, append_time, txns).read(p.fetch_offset, max_bytes)
    except TierlogError as exc:
        return _Read(kafka_error(exc))
    except Exception:
        log.exception("kafka fetch failed", extra={"topic": topic, "partition": p.partition})
        return _Read(KafkaError.unknown_server_error)


Wanted = list[tuple[str, list[tuple[int, FetchPartition]]]]  # per topic, its partitions (merged)


def _committed(request: FetchRequest) -> bool:
    """read_committed (Fetch v4+ carries an isolation level; older ones read uncommitted)."""
    return getattr(request, "isolation_level", 0) == READ_COMMITTED


def wanted(request: FetchRequest) -> Wanted:
    """The request's partitions, each once (fetch_rules.merged: as Kafka keys them)."""
    return merged((t.topic, p.partition, p) for t in request.topics for p in t.partitions)


async def _read_all(ctx: KafkaContext, request: FetchRequest, parts: Wanted) -> list[list[_Read]]:
    """Every partition read within the response's budget (fetch_rules.ResponseBudget)."""
    budget = ResponseBudget(request.max_bytes, ctx.services.config)
    committed = _committed(request)
    out: list[list[_Read]] = []
    for topic, partitions in parts:
        reads = []
        append_time = ctx.services.reads.log_append_time(topic)
        for _, p in partitions:
            limit = budget.limit(p.partition_max_bytes)
            r = await _read(ctx, topic, p, limit, append_time, committed)
            budget.spend(len(r.records))
            reads.append(r)
        out.append(reads)
    return out


async def _wait_for_any(
    ctx: KafkaContext, parts: Wanted, timeout_s: float, committed: bool = False
) -> None:
    """Until a fetched partition gets a record past its fetch offset (read_committed: past
    its high watermark, as records held back by an open transaction are there already), or
    the timeout."""
    waits = []
    for topic, partitions in parts:
        for _, p in partitions:
            state = ctx.services.reads.leader_state(topic, p.partition)
            if state is not None:
                at = max(p.fetch_offset, state.high_watermark) if committed else p.fetch_offset
                waits.append(asyncio.ensure_future(state.wait_for_data(at, timeout_s)))
    if not waits:
        await asyncio.sleep(timeout_s)
        return
    _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for w in pending:
        w.cancel()


def _diverging(response_cls: type[FetchResponse], r: _Read) -> dict[str, EpochEndOffset]:
    if r.diverging == UNDEFINED:
        return {}
    end = nested(response_cls, EpochEndOffset)
    epoch, end_offset = r.diverging
    return {"diverging_epoch": build(end, epoch=epoch, end_offset=end_offset)}


async def handle_fetch(
    ctx: KafkaContext, request: FetchRequest, response_cls: type[FetchResponse]
) -> FetchResponse:
    parts = wanted(request)
    deadline = time.monotonic() + min(request.max_wait.total_seconds(), 30.0)
    while True:
        reads = await _read_all(ctx, request, parts)
        got = sum(len(r.records) for rs in reads for r in rs)
        failed = any(
            r.error != KafkaError.none or r.diverging != UNDEFINED for rs in reads for r in rs
        )
        remaining = deadline - time.monotonic()
        if got >= max(1, request.min_bytes) or failed or remaining <= 0:
            break
        await _wait_for_any(ctx, parts, remaining, _committed(request))
    data_cls = nested(response_cls, PartitionData)
    topic_cls = nested(response_cls, FetchableTopicResponse)
    topics = []
    for (topic, partitions), rs in zip(parts, reads, strict=True):
        answers = tuple(
            build(
                data_cls,
                partition_index=index,
                error_code=r.error,
                high_watermark=r.high_watermark,
                last_stable_offset=r.stable if r.stable >= 0 else r.high_watermark,
                log_start_offset=r.log_start,
                aborted_transactions=None,  # aborted records are left out here
                preferred_read_replica=-1,
                records=r.records,
                **_diverging(response_cls, r),
            )
            for (index, _), r in zip(partitions, rs, strict=True)
        )
        topics.append(build(topic_cls, topic=topic, partitions=answers))
    return build(
        response_cls,
        throttle_time=NO_THROTTLE,
        error_code=KafkaError.none,
        session_id=0,  # no fetch sessions (KIP-227): clients send full requests
        responses=tuple(topics),
    )


async def _offset(
    ctx: KafkaContext, topic: str, p: ListOffsetsPartition, committed: bool = False
) -> tuple[KafkaError, int, int, int]:
    """(error, timestamp, offset, leader epoch) of one ListOffsets partition."""
    state = await leader(ctx, topic, p.partition_index, "describe")
    fenced = leader_epochs.fence(state, getattr(p, "current_leader_epoch", -1))
    if fenced is not None:
        return fenced, -1, -1, -1
    reads = ctx.services.reads
    if p.timestamp == LATEST:
        end = state.high_watermark
        if committed:  # read_committed's end is the last stable offset
            end = await reads.stable_offset(state)
        return KafkaError.none, -1, end, state.leader_epoch
    if p.timestamp == EARLIEST:
        first = await reads.earliest(state)
        return KafkaError.none, -1, first, leader_epochs.epoch_at(state, first)[0]
    if p.timestamp < 0:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            f"ListOffsets timestamp {p.timestamp}: only -1 (latest), -2 (earliest) and times",
        )
    found = await reads.offset_for_timestamp(state, p.timestamp)
    if found is None:
        return KafkaError.none, -1, -1, state.leader_epoch
    epoch = leader_epochs.epoch_at(state, found)[0]
    return KafkaError.none, await _record_time(reads, state, found), found, epoch


async def _record_time(reads: Reads, state: Partition, offset: int) -> int:
    """The timestamp of the record at `offset` (Kafka answers it beside the offset), read
    from whichever tier holds it; -1 if the record is gone (retention raced the lookup)."""
    got = await reads.record_at(state, offset, RECORD_TIME_BYTES)
    if got.batch.num_rows == 0:
        return -1
    stamp = got.batch.column("timestamp").cast(pa.int64())[0].as_py()
    return -1 if stamp is None else int(stamp)


async def handle_list_offsets(
    ctx: KafkaContext, request: ListOffsetsRequest, response_cls: type[ListOffsetsResponse]
) -> ListOffsetsResponse:
    part_cls = nested(response_cls, ListOffsetsPartitionResponse)
    topic_cls = nested(response_cls, ListOffsetsTopicResponse)
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            try:
                committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
                error, ts, offset, epoch = await _offset(ctx, t.name, p, committed)
            except TierlogError as exc:
                error, ts, offset, epoch = kafka_error(exc), -1, -1, -1
            parts.append(
                build(
                    part_cls,
                    partition_index=p.partition_index,
                    error_code=error,
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=epoch,
                )
            )
        topics.append(build(topic_cls, name=t.name, partitions=tuple(parts)))
    return build(response_cls, throttle_time=NO_THROTTLE, topics=tuple(topics))
