"""Reading frame headers back from a partition's segments, through the frame index.

Producer state is rebuilt from headers alone (60 bytes per frame), never from payloads.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ingest.log.local_log import LocalLog
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import HEADER, HEADER_SIZE, MAGIC, FrameHeader


def epoch_at(epochs: list[tuple[int, int]], offset: int) -> int:
    """Leader epoch of the frame holding `offset` per the epoch cache; -1 if unknown."""
    found = -1
    for epoch, start in epochs:
        if start > offset or offset < 0:
            break
        found = epoch
    return found


def iter_frame_headers(plog: LocalLog, start: int, end: int | None = None) -> Iterator[FrameHeader]:
    """Headers of the frames holding offsets in [start, end): the frame index gives where each
    frame is, one 60-byte pread reads its header. Frames of segments deleted meanwhile (by
    retention) are skipped. Holds the log's lock while it runs: consume it whole."""
    with plog.lock:  # a cleaner swap must not move frames under the index walk
        yield from _walk(plog, start, end)


def _walk(plog: LocalLog, start: int, end: int | None) -> Iterator[FrameHeader]:
    end = plog.log_end_offset if end is None else end
    floor = plog.index.frame_floor(start)
    first = floor.base_offset if floor is not None and floor.next_offset > start else start
    paths = {s.base_offset: s.path for s in plog.segments()}
    fds: dict[int, int] = {}
    try:
        for e in plog.index.frames(first, end):
            fd = fds.get(e.segment_base)
            if fd is None:
                path = paths.get(e.segment_base)
                try:
                    fd = os.open(path, os.O_RDONLY) if path else -1
                except FileNotFoundError:
                    fd = -1
                fds[e.segment_base] = fd
            if fd < 0:
                continue
            raw = os.pread(fd, HEADER_SIZE, e.position)
            header = FrameHeader._make(HEADER.unpack(raw)) if len(raw) == HEADER_SIZE else None
            if header is None or header.magic != MAGIC or header.base_offset != e.base_offset:
                raise TierlogError(
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    f"no frame header for offset {e.base_offset} at byte {e.position} of "
                    f"segment {e.segment_base} of {plog.dir}",
                )
            yield header
    finally:
        for fd in fds.values():
            if fd >= 0:
                os.close(fd)
