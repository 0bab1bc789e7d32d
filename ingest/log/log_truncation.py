"""Cutting a partition log's segments and index entries: at the tail (a follower truncating
its divergent records, Kafka's truncateTo), entirely (truncateFullyAndStartAt), and at the head
(retention deleting whole sealed segments).

`LocalLog` holds the writers' lock, installs the segment list these return, moves its
offsets and writes the index batch these fill (with its partition state) in one write.
"""

from __future__ import annotations

from rocksdict import WriteBatch

from ingest.log.index import FrameEntry, PartitionIndex, SegmentMeta
from ingest.log.segment import NO_TIMESTAMP, Segment


def cut_tail(
    idx: PartitionIndex,
    batch: WriteBatch,
    segs: list[Segment],
    bases: list[int],
    entry: FrameEntry,
) -> tuple[list[Segment], int | None]:
    """Remove the frame `entry` and everything after it: later segments are deleted, its
    segment is cut at the frame's position, the index entries from it on go into `batch`.
    Returns the segments kept and the time index's new last key (None if it is empty)."""
    new_leo = entry.base_offset
    i = bases.index(entry.segment_base)
    for dead in segs[i + 1 :]:
        dead.delete()
    seg = segs[i]
    seg.truncate(entry.position)
    seg.next_offset, seg.sealed = new_leo, False
    seg.max_timestamp = max(
        (e.max_timestamp for e in idx.frames(seg.base_offset, new_leo)),
        default=NO_TIMESTAMP,
    )
    if not seg.size:
        seg.created_ms = NO_TIMESTAMP
    idx.drop_frames(batch, new_leo)
    remaining = idx.truncate_time(batch, new_leo)
    idx.truncate_epochs_from_end(batch, new_leo)
    idx.put_segment(batch, seg.base_offset, SegmentMeta(seg.created_ms, seg.max_timestamp, False))
    return segs[: i + 1], remaining


def clear(idx: PartitionIndex, batch: WriteBatch) -> None:
    """Every frame, time and epoch entry of the partition goes (the files are the caller's)."""
    idx.drop_frames(batch, 0)
    idx.truncate_time(batch, 0)
    idx.truncate_epochs_from_end(batch, 0)


def segments_below(segs: list[Segment], offset: int) -> int:
    """How many leading segments hold only records below `offset` (never the active one)."""
    n = 0
    while n < len(segs) - 1 and segs[n].next_offset <= offset:
        n += 1
    return n


def drop_head(idx: PartitionIndex, batch: WriteBatch, first: int, log_start: int) -> None:
    """Index entries of the deleted segments below `first`, and of offsets below the new log
    start, go."""
    idx.drop_frames(batch, 0, first)
    idx.prune_time(batch, log_start)
    idx.truncate_epochs_from_start(batch, log_start)
