"""Re-framing a compacted segment: the surviving rows of consecutive frames, offsets kept.

Invariant kept for the rest of the broker: frames still tile the offset space. A frame's
header `record_count` is its offset SPAN (next_offset - base_offset), so after compaction a
frame holds fewer rows than that (gaps in offset_delta), possibly none. Everything that walks
frames by header (recovery's density check, follower appends, the index, segment boundaries)
is therefore unchanged; only code that maps rows to offsets must use offset_delta.

Grouping rules (why):
- consecutive frames merge into one output frame, so a compacted segment is not thousands of
  near-empty frames;
- never across a leader-epoch change, and a group starts where the epoch run starts, so a full
  index rebuild from headers recovers the same leader-epoch cache;
- the last batch of each (recent) producer stays a frame of its own with its original header
  (producer id, epoch, base sequence, span), like Kafka keeping it even when empty: producer
  state rebuilt by replaying headers from the log start still deduplicates its retries.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from logformat.frame import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    FrameHeader,
    pack_frame,
    serialize_batch,
)
from logformat.schema import RECORD_SCHEMA

TARGET_FRAME_BYTES = 1 << 20


class SourceFrame(NamedTuple):
    header: FrameHeader
    rows: pa.RecordBatch  # the frame's surviving rows (RECORD_SCHEMA, original deltas)
    keep_header: bool  # a producer's last batch: keep it as its own frame


class OutFrame(NamedTuple):
    data: bytes
    base_offset: int
    record_count: int  # the span
    max_timestamp: int
    rows: int


def encode(
    rows: pa.RecordBatch,
    base_offset: int,
    span: int,
    leader_epoch: int,
    max_timestamp: int,
    *,
    compression: str | None = None,
    producer: tuple[int, int, int] = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE),
) -> bytes:
    """A frame of `rows` (deltas relative to base_offset) spanning `span` offsets."""
    payload = serialize_batch(rows, compression)
    ts = rows.column(1).cast(pa.int64())
    first_ts = ts[0].as_py() if rows.num_rows else max_timestamp
    frame = pack_frame(
        payload,
        base_offset=base_offset,
        leader_epoch=leader_epoch,
        compression=compression,
        record_count=span,
        producer=producer,
        first_timestamp=first_ts,
        max_timestamp=max_timestamp,
    )
    return bytes(frame)


def _rebase(rows: pa.RecordBatch, shift: int) -> pa.RecordBatch:
    if not shift or not rows.num_rows:
        return rows
    deltas = pc.add(rows.column(0), pa.scalar(shift, pa.int32()))
    return pa.RecordBatch.from_arrays([deltas, *rows.columns[1:]], schema=RECORD_SCHEMA)


def _emit(group: Sequence[SourceFrame]) -> OutFrame:
    first, last = group[0].header, group[-1].header
    base, span = first.base_offset, last.next_offset - first.base_offset
    max_ts = max(s.header.max_timestamp for s in group)  # retention/time index see the same
    parts = [_rebase(s.rows, s.header.base_offset - base) for s in group if s.rows.num_rows]
    rows = (
        pa.Table.from_batches(parts, RECORD_SCHEMA).combine_chunks().to_batches()[0]
        if parts
        else pa.RecordBatch.from_pylist([], schema=RECORD_SCHEMA)
    )
    producer = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)
    if len(group) == 1 and group[0].keep_header:
        producer = (first.producer_id, first.producer_epoch, first.base_sequence)
    data = encode(
        rows,
        base,
        span,
        first.leader_epoch,
        max_ts,
        compression=first.compression,
        producer=producer,
    )
    return OutFrame(data, base, span, max_ts, rows.num_rows)


def reframe(
    sources: Sequence[SourceFrame], target_bytes: int = TARGET_FRAME_BYTES
) -> Iterator[OutFrame]:
    """Output frames for consecutive source frames (a whole segment group), spans tiling
    exactly [first base, last next_offset)."""
    group: list[SourceFrame] = []
    size = 0
    for src in sources:
        h = src.header
        rows_bytes = src.rows.nbytes
        if group and (
            src.keep_header
            or group[-1].keep_header
            or h.leader_epoch != group[0].header.leader_epoch
            or h.compression != group[0].header.compression
            or (size + rows_bytes > target_bytes and size > 0)
            or h.next_offset - group[0].header.base_offset > (1 << 31) - 1
        ):
            yield _emit(group)
            group, size = [], 0
        group.append(src)
        size += rows_bytes
    if group:
        yield _emit(group)
