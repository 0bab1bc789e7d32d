"""A partition log's segment list and the lifetime of its segments' files (Kafka's LogSegments).

The list is replaced, never mutated, so a lock-free reader that took `segments` and `bases`
keeps a consistent snapshot. Segments that leave the list (retention, a cleaner swap) keep
their descriptors for a grace period, for the readers still in flight (the graveyard).
The log's lock guards every change; this class holds no lock of its own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ingest.log.log_types import SegmentInfo
from ingest.log.segment import Graveyard, Segment


class LogSegments:
    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.bases: list[int] = []
        self._graveyard = Graveyard()

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    def infos(self) -> list[SegmentInfo]:
        return [SegmentInfo.of(s) for s in self.segments]

    def set(self, segs: list[Segment]) -> None:
        self.segments, self.bases = segs, [s.base_offset for s in segs]

    def add(self, seg: Segment) -> None:
        """A new active segment (a roll)."""
        self.set([*self.segments, seg])

    def drop_head(self, n: int) -> None:
        """The first `n` segments leave the list (retention); their files are deleted once
        the readers still using them have had their grace period."""
        now = time.monotonic()
        self._graveyard.reap(now)
        self._graveyard.bury(self.segments[:n], now)
        self.set(self.segments[n:])

    def retire(self, segs: Sequence[Segment]) -> None:
        """Segments already replaced in the list (a cleaner swap): close them after the
        grace period (their files were renamed over or unlinked)."""
        now = time.monotonic()
        self._graveyard.reap(now)
        self._graveyard.retire(segs, now)

    def reap(self) -> None:
        """Close the descriptors of removed segments whose grace period has passed."""
        self._graveyard.reap(time.monotonic())

    def close(self) -> None:
        for seg in self.segments:
            seg.close()
        self._graveyard.close_all()
