"""Reads a hosted partition's records for consumers: frames → one Arrow batch of offsets."""

from __future__ import annotations

import weakref

import pyarrow as pa
import pyarrow.compute as pc

from cluster.read_contract import FetchResult, FrameCrc
from ingest.log import storage_errors
from ingest.log.log_read import CorruptLogError
from ingest.replication import corruption
from ingest.replication.partition import Partition
from logformat import records
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import decode_records
from logformat.schema import CONSUMER_SCHEMA

MAX_WAIT_MS = 30_000


_EMPTY = pa.RecordBatch.from_pylist([], schema=CONSUMER_SCHEMA)


def out_of_range(state: Partition, offset: int, log_start: int | None = None) -> TierlogError:
    """416 quoting the whole log: from `log_start` (the start across tiers, when the caller
    knows it) to the log end, naming the hot range too when older offsets are cold."""
    log = state.log
    hot_start, end = log.log_start_offset, log.log_end_offset
    start = hot_start if log_start is None else min(log_start, hot_start)
    tiers = f" (cold tier from {start}, hot tier [{hot_start}, {end}])" if start < hot_start else ""
    name = f"{state.topic}-{state.partition}"
    return TierlogError(
        ErrorCode.OFFSET_OUT_OF_RANGE,
        f"offset {offset} is outside {name}'s log [{start}, {end}]{tiers}",
        log_start_offset=start,
        log_end_offset=end,
        high_watermark=state.high_watermark,
    )


def require_online(state: Partition) -> None:
    """KAFKA_STORAGE_ERROR (retriable) while this broker's copy is offline after a storage
    error, as Kafka answers every read of an offline replica: its log end froze when it
    failed, so quoting it (416) would tell a consumer already past it to reset."""
    failure = state.log.failure
    if failure is not None:
        raise TierlogError(
            ErrorCode.KAFKA_STORAGE_ERROR,
            f"{state.topic}-{state.partition} is offline on this broker after a storage "
            f"error ({storage_errors.describe(failure)}); retry: another replica takes over",
        )


async def fetch(
    state: Partition, offset: int, max_records: int, max_bytes: int, wait_ms: int
) -> FetchResult:
    require_online(state)
    log = state.log
    if offset < log.log_start_offset or offset > log.log_end_offset:
        raise out_of_range(state, offset)
    if offset >= state.high_watermark and wait_ms > 0:
        await state.wait_for_data(offset, min(wait_ms, MAX_WAIT_MS) / 1000)
        # The polls one produce wakes ask for the same records: read them once for all.
        key = (offset, max_records, max_bytes, state.high_watermark, log.log_start_offset)
        shared = _WOKEN.get(state)
        if shared is not None and shared[0] == key:
            return shared[1]
        result = _read(state, offset, max_records, max_bytes)
        _WOKEN[state] = (key, result)
        return result
    return _read(state, offset, max_records, max_bytes)


# Per partition, the last read a woken long poll made (records below the high watermark do
# not change; the key holds the high watermark and the log start).
_WOKEN: weakref.WeakKeyDictionary[Partition, tuple[tuple[int, ...], FetchResult]] = (
    weakref.WeakKeyDictionary()
)


def _read(state: Partition, offset: int, max_records: int, max_bytes: int) -> FetchResult:
    log = state.log
    hw = state.high_watermark
    empty = FetchResult(_EMPTY, offset, hw, log.log_start_offset)
    if offset >= hw:
        return empty
    batches = []
    rows = 0
    covered = offset  # every offset below this was read (kept or compacted away)
    frames: list[FrameCrc] = []
    try:  # every frame read is CRC-checked (log_read.py): decoding need not check again
        read = log.read(offset, max_bytes, hw)
    except CorruptLogError as exc:
        corruption.report(state, exc)
        raise
    for header, data in read:
        batch = records.to_consumer_batch(decode_records(data, verify=False), header.base_offset)
        # Filter by offset, not by row index: a compacted frame spans more offsets than rows.
        if header.base_offset < offset or header.next_offset > hw:
            offsets = batch.column(0)
            batch = batch.filter(pc.and_(pc.greater_equal(offsets, offset), pc.less(offsets, hw)))
        batches.append(batch)
        frames.append(FrameCrc(header.base_offset, header.last_offset, header.crc))
        rows += batch.num_rows
        covered = min(header.next_offset, hw)
        if rows >= max_records:
            break
    if not batches:
        return empty
    table = pa.Table.from_batches(batches, CONSUMER_SCHEMA)
    if table.num_rows > max_records:
        # Cut short: resume after the last record returned (gaps after it are read again).
        table = table.slice(0, max_records)
        covered = table.column(0)[-1].as_py() + 1
    out = table.combine_chunks().to_batches()
    result = out[0] if out else _EMPTY
    # Past the frames read, not last offset + 1: compacted logs have gaps, and a fetch that
    # met only compacted-away offsets must still move the consumer on.
    served = tuple(f for f in frames if f.base_offset < covered)
    return FetchResult(result, covered, hw, log.log_start_offset, served)
