"""The partition log's plain values: its configuration and what it tells about a segment.

Kept apart from local_log.py so that the modules below the log (segment swap, recovery) can
name them without importing the log itself.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from ingest.log.segment import Segment

NO_MAX_TIMESTAMP = -(1 << 63)  # the running max timestamp of a log with no time entry


class LogConfig(NamedTuple):
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000


class SegmentInfo(NamedTuple):
    base_offset: int
    next_offset: int
    size: int
    sealed: bool
    path: str
    max_timestamp: int
    created_ms: int

    @classmethod
    def of(cls, seg: Segment) -> SegmentInfo:
        return cls(
            seg.base_offset,
            seg.next_offset,
            seg.size,
            seg.sealed,
            seg.path,
            seg.max_timestamp,
            seg.created_ms,
        )


def now_ms() -> int:
    return int(time.time() * 1000)


class PartitionDir(NamedTuple):
    """Where a partition's log lives and which topic incarnation it belongs to."""

    directory: str
    topic: str
    topic_id: str
    partition: int
