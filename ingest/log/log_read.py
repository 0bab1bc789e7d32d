"""The partition log's lock-free read path: frames by offset, offset by timestamp.

Every frame a read returns has had its CRC checked (one CRC-32C over the frame body, per frame,
not per record) and its base offset checked against the offsets the index promises (dense
from the segment's base; Segment.read_frames): bytes that rot on disk are never served to a
client or a follower. A frame that fails raises `CorruptLogError`, naming its offset.

Readers take no lock. They work on a `LogView`, a snapshot of the end offset, start offset and
segment list (read in that order, so every offset below the end has its segment listed), and
never look past what the index knew. A log cleaner swap replaces files and index entries
together; `consistent` reruns a read that may have seen both sides (a seqlock).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from typing import NamedTuple, TypeVar, cast

import pyarrow as pa
import pyarrow.compute as pc

from ingest.log.index import PartitionIndex
from ingest.log.segment import Segment
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import HEADER_SIZE, CorruptFrameError, FrameHeader
from logformat.frame import decode_records as _decode

ReadResult = list[tuple[FrameHeader, memoryview]]
_T = TypeVar("_T")


class CorruptLogError(TierlogError):
    """A stored frame failed its CRC or offset check: it is not served (KAFKA_STORAGE_ERROR,
    a 503, so clients retry and fetch nodes fail over to another replica)."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(
            ErrorCode.KAFKA_STORAGE_ERROR,
            f"the stored frame at offset {offset} is corrupt ({reason}); it is not served",
            corrupt_offset=offset,
        )
        self.offset = offset


class LogView(NamedTuple):
    """What one lock-free read sees; build it in field order (end offset first)."""

    log_end_offset: int
    log_start_offset: int
    segments: list[Segment]
    bases: list[int]


def consistent(generation: Callable[[], int], read: Callable[[], _T], directory: str) -> _T:
    """Run a lock-free read again if a cleaner swap ran while it looked at segments and
    index (it may then have mixed an old file with new positions and failed or read junk).
    `generation` is the swap counter: odd while a swap is under way."""
    for _ in range(1000):
        gen = generation()
        try:
            out = read()
        except (TierlogError, CorruptFrameError, ValueError, OSError):
            if gen == generation() and not gen & 1:
                raise
            out = None
        if gen == generation() and not gen & 1:
            return cast(_T, out)
        time.sleep(0.0005)  # a swap's critical section is one index write
    raise TierlogError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {directory} keeps swapping")


def read(
    idx: PartitionIndex, view: LogView, offset: int, max_bytes: int, max_offset: int | None
) -> ReadResult:
    """Whole frames from the one holding `offset`, up to max_bytes (at least one frame)."""
    leo, lso, segs, bases = view
    if offset < lso or offset > leo:
        raise TierlogError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} not in [{lso}, {leo}]",
            log_start_offset=lso,
            log_end_offset=leo,
        )
    limit = leo if max_offset is None else min(max_offset, leo)
    entry = idx.frame_floor(offset) if offset < limit else None
    if entry is None:
        return []
    i = bisect.bisect_right(bases, entry.segment_base) - 1
    if i < 0 or bases[i] != entry.segment_base:  # deleted by retention meanwhile
        raise TierlogError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {offset} was deleted")
    seg, pos, need = segs[i], entry.position, entry.size
    expected = entry.base_offset  # of the next frame on disk, as the index knows it
    out: ReadResult = []
    taken = 0
    while True:
        avail = seg.size - pos
        if avail <= 0:
            i += 1
            if i >= len(segs):
                return out
            seg, pos, expected = segs[i], 0, segs[i].base_offset
            continue
        budget = max_bytes - taken if out else max(max_bytes, need)
        if min(avail, budget) < HEADER_SIZE:
            return out
        before = len(out)
        try:
            used, more, expected = seg.read_frames(
                pos, min(avail, budget), limit, offset, out, expected
            )
        except CorruptFrameError as exc:
            if out:  # the whole frames before it are served; a read from the bad one fails
                return out
            raise CorruptLogError(expected if exc.offset is None else exc.offset, str(exc)) from exc
        taken += sum(h.size for h, _ in out[before:])
        if more < 0 or (out and more):  # at the limit, or the next frame does not fit
            return out
        pos, need = pos + used, more


def offset_for_timestamp(
    idx: PartitionIndex, view: Callable[[], LogView], ts_ms: int
) -> int | None:
    """First offset whose record timestamp is >= ts_ms (Kafka's ListOffsets by time).
    `view` is taken after the time index lookup."""
    first = idx.time_lookup(ts_ms)
    if first is None:
        return None
    leo, lso, segs, bases = view()
    start = max(first, lso)
    floor = idx.frame_floor(start)
    for entry in idx.frames(floor.base_offset if floor else start):
        if entry.base_offset >= leo:
            return None
        if entry.max_timestamp < ts_ms or entry.next_offset <= start:
            continue
        seg = segs[bisect.bisect_right(bases, entry.segment_base) - 1]
        try:
            batch = _decode(seg.read(entry.position, entry.size))
        except CorruptFrameError as exc:
            raise CorruptLogError(entry.base_offset, str(exc)) from None
        deltas = batch.column(0)
        mask = pc.and_(
            pc.greater_equal(batch.column(1).cast(pa.int64()), ts_ms),
            pc.greater_equal(deltas, start - entry.base_offset),
        )
        row = pc.index(mask, True).as_py()
        if row >= 0:
            return int(entry.base_offset + deltas[row].as_py())
    return None
