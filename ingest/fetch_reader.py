"""Reads a hosted partition's records for consumers: frames → one Arrow batch of offsets."""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa

from ingest.partition_state import PartitionState
from logformat import records
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import decode_records
from logformat.schema import CONSUMER_SCHEMA

MAX_WAIT_MS = 30_000


_EMPTY = pa.RecordBatch.from_pylist([], schema=CONSUMER_SCHEMA)


class FetchResult(NamedTuple):
    batch: pa.RecordBatch  # CONSUMER_SCHEMA
    next_offset: int
    high_watermark: int
    log_start_offset: int


def out_of_range(state: PartitionState, offset: int) -> TierlogError:
    log = state.log
    return TierlogError(
        ErrorCode.OFFSET_OUT_OF_RANGE,
        f"offset {offset} is outside {state.topic}-{state.partition}'s log "
        f"[{log.log_start_offset}, {log.log_end_offset}]",
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        high_watermark=state.high_watermark,
    )


async def fetch(
    state: PartitionState, offset: int, max_records: int, max_bytes: int, wait_ms: int
) -> FetchResult:
    log = state.log
    if offset < log.log_start_offset or offset > log.log_end_offset:
        raise out_of_range(state, offset)
    if offset >= state.high_watermark and wait_ms > 0:
        await state.wait_for_data(offset, min(wait_ms, MAX_WAIT_MS) / 1000)
    hw = state.high_watermark
    empty = FetchResult(_EMPTY, offset, hw, log.log_start_offset)
    if offset >= hw:
        return empty
    batches = []
    rows = 0
    for header, data in log.read(offset, max_bytes, hw):
        batch = records.to_consumer_batch(decode_records(data, verify=False), header.base_offset)
        if header.base_offset < offset:
            batch = batch.slice(offset - header.base_offset)
        if header.next_offset > hw:
            batch = batch.slice(0, max(0, batch.num_rows - (header.next_offset - hw)))
        batches.append(batch)
        rows += batch.num_rows
        if rows >= max_records:
            break
    if not batches:
        return empty
    table = pa.Table.from_batches(batches, CONSUMER_SCHEMA).slice(0, max_records)
    out = table.combine_chunks().to_batches()
    if not out or out[0].num_rows == 0:
        return empty
    result = out[0]
    # The last offset + 1, not offset + rows: compacted logs may have gaps.
    next_offset = result.column(0)[-1].as_py() + 1
    return FetchResult(result, next_offset, hw, log.log_start_offset)
