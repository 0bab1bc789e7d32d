"""The partition log's append steps that need no log state: checking and numbering frames,
grouping them by segment, and the index entries of one segment's group.

`LocalLog` holds the writers' lock around all of it and owns the offsets, the segment
list and the index batch; these functions only compute (and fill the batch).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from rocksdict import WriteBatch

from ingest.log.index import PartitionIndex, SegmentMeta
from ingest.log.segment import BytesLike, Segment
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import HEADER_SIZE, MAGIC, assign, scan

_META = struct.Struct("<4s12xI6xi22xq")  # magic, payload_length, record_count, max_timestamp

Entry = tuple[int, int, int, int]  # base offset, record count, max timestamp, size
Ranges = list[tuple[int, int]]  # (first, last) offset of each frame


def number_frames(
    frames: Sequence[bytearray], first_offset: int, leader_epoch: int
) -> tuple[list[Entry], Ranges]:
    """Check each frame is whole and assign it offsets from `first_offset` (in place)."""
    entries: list[Entry] = []
    out: Ranges = []
    off = first_offset
    unpack = _META.unpack_from
    for frame in frames:
        size = len(frame)
        try:
            magic, payload_len, count, max_ts = unpack(frame)
        except struct.error:
            magic = None
        if magic != MAGIC or size != HEADER_SIZE + payload_len or count <= 0:
            raise TierlogError(ErrorCode.CORRUPT_MESSAGE, "not a whole frame")
        assign(frame, off, leader_epoch)
        entries.append((off, count, max_ts, size))
        out.append((off, off + count - 1))
        off += count
    return entries, out


def replicated_frames(
    frame_bytes: BytesLike, log_end: int, latest_epoch: int
) -> tuple[list[BytesLike], list[Entry], list[tuple[int, int]], Ranges]:
    """Split a leader's bytes into frames that must continue the log at `log_end`.

    Returns the frame buffers, their entries, the (epoch, start offset) of every epoch newer
    than `latest_epoch` they begin, and each frame's offset range."""
    result = scan(frame_bytes)
    if result.torn or not result.frames:
        raise TierlogError(ErrorCode.CORRUPT_MESSAGE, "replicated bytes are not frames")
    view = memoryview(frame_bytes)
    bufs: list[BytesLike] = []
    entries: list[Entry] = []
    epochs: list[tuple[int, int]] = []
    expected, latest = log_end, latest_epoch
    for pos, h in result.frames:
        if h.base_offset != expected:
            raise TierlogError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"frame at {h.base_offset} does not continue the log at {expected}",
            )
        if h.leader_epoch > latest:
            epochs.append((h.leader_epoch, h.base_offset))
            latest = h.leader_epoch
        bufs.append(view[pos : pos + h.size])
        entries.append((h.base_offset, h.record_count, h.max_timestamp, h.size))
        expected = h.next_offset
    return bufs, entries, epochs, [(h.base_offset, h.last_offset) for _, h in result.frames]


def group_end(entries: Sequence[Entry], i: int, room: int, empty: bool) -> tuple[int, int]:
    """Greedy group from entries[i] that fits in `room` bytes: (end index, total size).

    A lone oversized frame goes into an empty segment; (i, 0) means roll first."""
    j, total, n = i, 0, len(entries)
    while j < n and (total + entries[j][3] <= room or (j == i and empty)):
        total += entries[j][3]
        j += 1
    return j, total


def index_group(
    idx: PartitionIndex,
    batch: WriteBatch,
    seg: Segment,
    entries: Sequence[Entry],
    pos: int,
    max_ts: int,
) -> int:
    """Index a group just written to `seg` at `pos`; advance the segment's end offset and max
    timestamp. Returns the running max timestamp (the time index keeps only its increases)."""
    for base, count, frame_max, size in entries:
        idx.put_frame(batch, base, seg.base_offset, pos, size, count, frame_max)
        pos += size
        if frame_max > max_ts:  # time index keeps only running-max increases
            idx.put_time(batch, frame_max, base)
            max_ts = frame_max
        if frame_max > seg.max_timestamp:
            seg.max_timestamp = frame_max
    last = entries[-1]
    seg.next_offset = last[0] + last[1]
    idx.put_segment(batch, seg.base_offset, SegmentMeta(seg.created_ms, seg.max_timestamp, False))
    return max_ts


def write_groups(
    idx: PartitionIndex,
    batch: WriteBatch,
    seg: Segment,
    frames: tuple[Sequence[BytesLike], Sequence[Entry]],
    limits: tuple[int, int, int],
    roll: Callable[[int], Segment],
) -> tuple[Segment, int]:
    """Write `frames` (buffers, entries) from the active segment `seg` on, one system call per
    group that fits, rolling when one is full; index each group into `batch`. `limits` is
    (segment.bytes, now ms, running max timestamp). Returns the active segment and the new
    running max timestamp."""
    bufs, entries = frames
    limit, now_ms, max_ts = limits
    i, n = 0, len(bufs)
    while i < n:
        j, total = group_end(entries, i, limit - seg.size, seg.size == 0)
        if j == i:
            seg = roll(entries[i][0])
            continue
        pos = seg.append(bufs[i:j], total)
        if seg.created_ms < 0:
            seg.created_ms = now_ms
        max_ts = index_group(idx, batch, seg, entries[i:j], pos, max_ts)
        i = j
    return seg, max_ts
