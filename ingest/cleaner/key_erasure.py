"""Erasing keys from one replica's hot log (issue 31): every record whose key is named and
whose offset lies below the request's end offset goes; everything else stays as it was.

Each replica rewrites its own segments (followers copy frames by offset, never the leader's
files), so leader and followers must reach the same bytes on their own. They do because the
rewrite is a function of one frame at a time: a frame without a named key is kept byte for
byte; a frame with one is re-encoded alone (cleaner_frames.reframe of that single frame) with
its original header fields — base offset, offset span, leader epoch, producer id, epoch and
base sequence, compression, max timestamp — so offsets keep their gaps (as after key
compaction), the high watermark and every other record's offset are unchanged, and producer
state rebuilt from headers still deduplicates retries. Segment boundaries may differ between
replicas; the frames, concatenated, are the same.

The active segment is rolled first when it holds offsets below the end, so every record to
erase sits in a sealed segment the cleaner's crash-safe swap (LocalLog.swap_cleaned,
segment_swap) can replace. A segment is swapped as one step: a crash leaves it either old or
erased, and running the pass again finds nothing left to do in an erased one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from ingest.cleaner.cleaner_frames import SourceFrame, reframe
from ingest.cleaner.log_cleaner import segment_frames
from ingest.log import segment_swap
from ingest.log.local_log import LocalLog, SegmentInfo
from logformat.frame import FrameHeader, decode_records

_DELTA, _KEY = 0, 2  # RECORD_SCHEMA columns: offset_delta, timestamp, key, value, headers


class EraseResult(NamedTuple):
    """One replica's pass over one partition."""

    records_removed: int
    segments_rewritten: int
    bytes_rewritten: int  # size of the segments replaced

    def to_json(self) -> dict[str, int | bool]:
        return {
            "done": True,
            "records_removed": self.records_removed,
            "segments_rewritten": self.segments_rewritten,
            "bytes_rewritten": self.bytes_rewritten,
        }


class LogChangedError(RuntimeError):
    """The log changed under the pass (truncation, retention, the cleaner): run it again."""


def key_set(keys: Iterable[bytes]) -> pa.Array:
    return pa.array(sorted(set(keys)), pa.binary())


def erased_frame(
    header: FrameHeader, frame: bytes, keys: pa.Array, end_offset: int
) -> bytes | None:
    """The frame without the rows to erase, or None when it holds none."""
    if header.base_offset >= end_offset:
        return None
    batch = decode_records(frame, verify=False)
    named = pc.fill_null(pc.is_in(batch.column(_KEY), value_set=keys), False)
    if header.next_offset > end_offset:  # only offsets below the end are erased
        before = pc.less(
            batch.column(_DELTA), pa.scalar(end_offset - header.base_offset, pa.int32())
        )
        named = pc.and_(named, before)
    if not pc.any(named).as_py():
        return None
    rows = batch.filter(pc.invert(named))
    (out,) = reframe([SourceFrame(header, rows, True)])
    return out.data


def erase_segment(
    seg: SegmentInfo, keys: pa.Array, end_offset: int
) -> tuple[list[tuple[FrameHeader, bytes]], int] | None:
    """The segment's frames after erasure and the number of records removed; None when the
    segment holds no record to erase."""
    frames: list[tuple[FrameHeader, bytes]] = []
    removed = 0
    for header, frame in segment_frames(seg.path):
        new = erased_frame(header, frame, keys, end_offset)
        if new is None:
            frames.append((header, frame))
            continue
        removed += _rows(frame) - _rows(new)
        frames.append((header, new))
    return (frames, removed) if removed else None


def _rows(frame: bytes) -> int:
    return int(decode_records(frame, verify=False).num_rows)


def _swap(plog: LocalLog, seg: SegmentInfo, frames: list[tuple[FrameHeader, bytes]]) -> int:
    entries, pos = [], 0
    for header, data in frames:
        entries.append(
            (header.base_offset, pos, len(data), header.record_count, header.max_timestamp)
        )
        pos += len(data)
    path, _ = segment_swap.write_cleaned(plog.dir, seg.base_offset, (d for _, d in frames))
    if not plog.swap_cleaned([seg], path, entries):
        raise LogChangedError(f"{plog.dir}: segment {seg.base_offset} changed during erasure")
    return pos


def erase_keys(
    plog: LocalLog,
    keys: pa.Array,
    end_offset: int,
    on_swap: Callable[[int, int, int], None] | None = None,
) -> EraseResult | None:
    """Erase `keys` below `end_offset` from this replica's log. None while the replica has not
    yet reached `end_offset` (a follower still catching up: run it again later). `on_swap`
    hears (base offset, next offset, new size) of each segment rewritten."""
    if plog.log_end_offset < end_offset:
        return None
    segments = plog.segments()
    if segments and not segments[-1].sealed and segments[-1].base_offset < end_offset:
        plog.roll()
        segments = plog.segments()
    removed = rewritten = rewritten_bytes = 0
    for seg in segments:
        if seg.base_offset >= end_offset or not seg.sealed:
            break
        try:
            erased = erase_segment(seg, keys, end_offset)
        except FileNotFoundError:  # retention deleted it meanwhile: nothing left in it
            continue
        if erased is None:
            continue
        frames, n = erased
        size = _swap(plog, seg, frames)
        if on_swap is not None:
            on_swap(seg.base_offset, seg.next_offset, size)
        removed, rewritten, rewritten_bytes = removed + n, rewritten + 1, rewritten_bytes + seg.size
    return EraseResult(removed, rewritten, rewritten_bytes)
