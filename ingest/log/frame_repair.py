"""One corrupt frame of a partition log put back in place from a whole copy of it.

Frames travel between replicas as the bytes the leader stored (header fields included), so
every replica's frame at an offset is the same bytes. A copy is taken only when it is that
frame: its CRC is whole, and its base offset, record count and size are those this log's
index gives for the frame, and its leader epoch is the one this log's epoch history gives
for the offset. One leader per epoch writes an offset once, so (epoch, offset) names one
frame (Kafka's log matching): a copy from a replica that diverged, or that compacted its
segment otherwise, does not match and is refused. The copy is written over the bad bytes at
the same position and synced; offsets, index and segment boundaries do not change.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence

from ingest.log.index import FrameEntry, PartitionIndex
from ingest.log.log_read import LogView
from ingest.log.segment import Segment
from logformat.frame import CorruptFrameError, decode_header, verify_crc


class FrameMismatch(ValueError):
    """The offered bytes are not a whole copy of the frame at that offset of this log."""


def epoch_at(epochs: Sequence[tuple[int, int]], offset: int) -> int | None:
    """The leader epoch that wrote `offset`, by the log's epoch history (None: unknown)."""
    starts = [start for _, start in epochs]
    i = bisect.bisect_right(starts, offset) - 1
    return epochs[i][0] if i >= 0 else None


def check_copy(data: bytes, entry: FrameEntry, epoch: int) -> None:
    """Raise FrameMismatch unless `data` is exactly one whole frame that is `entry`'s."""
    try:
        header = decode_header(data)
        verify_crc(data, 0, header)
    except CorruptFrameError as exc:
        raise FrameMismatch(f"the copy is not a whole frame: {exc}") from None
    got = (header.base_offset, header.record_count, header.size, header.leader_epoch)
    want = (entry.base_offset, entry.record_count, entry.size, epoch)
    if len(data) != header.size or got != want:
        raise FrameMismatch(
            f"the copy is (offset, records, bytes, epoch) {got}, this log's frame is {want}"
        )


def is_whole(seg: Segment, entry: FrameEntry) -> bool:
    """Whether the frame's bytes in this log pass their checks now."""
    data = seg.read(entry.position, entry.size)
    try:
        header = decode_header(data)
        verify_crc(data, 0, header)
    except CorruptFrameError:
        return False
    return header.base_offset == entry.base_offset and header.size == entry.size


def replace(
    index: PartitionIndex,
    view: LogView,
    epochs: Sequence[tuple[int, int]],
    offset: int,
    data: bytes,
) -> bool:
    """Write `data` over the frame starting at `offset` (the log's writers' lock held);
    False when this log's frame there is whole already (nothing written)."""
    leo, lso, segs, bases = view
    entry = index.frame_floor(offset)
    if not lso <= offset < leo or entry is None or entry.base_offset != offset:
        raise FrameMismatch(f"no frame of this log starts at offset {offset}")
    epoch = epoch_at(epochs, offset)
    if epoch is None:
        raise FrameMismatch(f"no leader epoch of this log covers offset {offset}")
    check_copy(data, entry, epoch)
    i = bisect.bisect_right(bases, entry.segment_base) - 1
    if i < 0 or bases[i] != entry.segment_base:
        raise FrameMismatch(f"the segment of offset {offset} is gone")
    seg = segs[i]
    if is_whole(seg, entry):
        return False
    # Not the segment's own descriptor: it is O_APPEND, which ignores pwrite's position.
    fd = os.open(seg.path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        rest, pos = memoryview(data), entry.position
        while rest:
            n = os.pwrite(fd, rest, pos)
            rest, pos = rest[n:], pos + n
        os.fdatasync(fd)
    finally:
        os.close(fd)
    return True
