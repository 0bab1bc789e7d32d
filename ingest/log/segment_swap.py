"""Crash-safe replacement of sealed segments by their cleaned copy (Kafka's LogSegment swap).

Protocol, for segments [b0, b1, …, bn) replaced by one cleaned file covering the same
offsets [b0, end):
1. write `{b0}.log.cleaned`, fsync it;                    (crash: recovery deletes it)
2. rename it to `{b0}.log.swap`, fsync the directory;     (the commit point)
3. unlink b1.log … bn.log, rename `.swap` over `{b0}.log`, fsync the directory.
A crash after 2 is rolled forward by `finish` at the next open: every `.log` whose base lies
in the swap file's offset range goes, and the swap file takes b0's name. The index entries
of the range are then stale; recovery's consistency check sees it (the last frame's segment
or position no longer matches the file) and reindexes the segment from the file.
`install_cleaned` does step 3 for an open log (LocalLog.swap_cleaned holds its lock and
decides whether the swap still applies).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
from collections.abc import Iterable, Sequence

from ingest.log.index import LogIndex, PartitionIndex, SegmentMeta
from ingest.log.log_types import SegmentInfo
from ingest.log.segment import Segment, fsync_dir, list_segments, segment_name
from logformat.frame import scan

log = logging.getLogger(__name__)

CLEANED = ".cleaned"
SWAP = ".swap"


def cleaned_path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, segment_name(base_offset) + CLEANED)


def write_cleaned(directory: str, base_offset: int, frames: Iterable[bytes]) -> tuple[str, int]:
    """Step 1: the cleaned file, fsynced. Returns (path, size)."""
    path = cleaned_path(directory, base_offset)
    size = 0
    with open(path, "wb") as f:
        for frame in frames:
            f.write(frame)
            size += len(frame)
        f.flush()
        os.fsync(f.fileno())
    return path, size


def discard(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def commit(path: str) -> str:
    """Step 2: `.cleaned` → `.swap`; from here the swap happens even across a crash."""
    swap = path[: -len(CLEANED)] + SWAP
    os.rename(path, swap)
    fsync_dir(os.path.dirname(swap))
    return swap


def install(swap: str, old_paths: list[str]) -> None:
    """Step 3: the old files go, the swap file takes the first one's name."""
    for path in old_paths[1:]:
        discard(path)
    os.replace(swap, old_paths[0])
    fsync_dir(os.path.dirname(swap))


def find(segs: Sequence[Segment], bases: list[int], old: Sequence[SegmentInfo]) -> int | None:
    """Where the sealed segments `old` (as the cleaner saw them) still are, unchanged and
    before the active segment, in the live list `segs`; None if the log changed meanwhile."""
    i = bisect.bisect_left(bases, old[0].base_offset) if old else 0
    mine = segs[i : i + len(old)]
    if (
        not old
        or i + len(old) >= len(segs)  # never the active segment
        or [(s.base_offset, s.next_offset, s.size, s.sealed) for s in mine]
        != [(s.base_offset, s.next_offset, s.size, True) for s in old]
    ):
        return None
    return i


def install_cleaned(
    swap: str,
    old: Sequence[Segment],
    frames: Sequence[tuple[int, int, int, int, int]],
    index: LogIndex,
    idx: PartitionIndex,
) -> Segment:
    """Step 3 for a live log, then its index: the swap file replaces the sealed segments `old`,
    whose frames' entries give way to `frames` ((base offset, position, size, span, max
    timestamp) in the new file). Returns the new segment; the caller lists it."""
    install(swap, [s.path for s in old])
    base, end = old[0].base_offset, old[-1].next_offset
    new = Segment.open(old[0].path, base)
    new.next_offset, new.sealed = end, True
    new.created_ms = old[0].created_ms
    new.max_timestamp = max(s.max_timestamp for s in old)
    batch = index.batch()
    idx.drop_frames(batch, base, end)
    for fbase, pos, size, span, max_ts in frames:
        idx.put_frame(batch, fbase, base, pos, size, span, max_ts)
    idx.put_segment(batch, base, SegmentMeta(new.created_ms, new.max_timestamp, True))
    index.write(batch)
    return new


def finish(directory: str) -> int:
    """At open, before the segments are listed: drop unfinished `.cleaned` files, roll every
    committed `.swap` forward. Returns the number of swaps finished."""
    done = 0
    names = sorted(os.listdir(directory))
    for name in names:
        if name.endswith(CLEANED):
            log.warning(
                "dropping an unfinished cleaned segment", extra={"dir": directory, "file": name}
            )
            discard(os.path.join(directory, name))
    for name in names:
        if not name.endswith(SWAP):
            continue
        swap = os.path.join(directory, name)
        target = swap[: -len(SWAP)]
        stem = os.path.basename(target)[: -len(".log")]
        with open(swap, "rb") as f:
            data = f.read()
        result = scan(data)
        if not stem.isdigit() or result.torn or not result.frames:
            # Cannot happen short of disk corruption (the file was fsynced before the
            # rename); the originals are untouched only if the target still exists.
            log.error("unusable swap file, discarding it", extra={"dir": directory, "file": name})
            discard(swap)
            continue
        base, end = int(stem), result.frames[-1][1].next_offset
        if result.frames[0][1].base_offset != base:
            log.error(
                "swap file does not start at its base", extra={"dir": directory, "file": name}
            )
            discard(swap)
            continue
        olds = [p for b, p in list_segments(directory) if base <= b < end]
        for path in olds:
            if path != target:
                discard(path)
        os.replace(swap, target)
        fsync_dir(directory)
        log.warning(
            "finished an interrupted segment swap",
            extra={"dir": directory, "base_offset": base, "end_offset": end, "replaced": len(olds)},
        )
        done += 1
    return done
