"""One partition's log with its producer state (Kafka's UnifiedLog, over LocalLog).

LocalLog (local_log.py) stores frames; ProducerStateManager remembers each idempotent
producer's last batches. They must change together: a frame appended, copied from a leader,
truncated or dropped without the matching producer-state change would let a retried batch
be appended twice, or refuse a good one. This class is the one place that pairs them, so the
replication layer above calls one method per change. It also owns what else is the log's own
bookkeeping on disk: the epoch-cache lookups, log-start/retention advancement and the
high-watermark checkpoint file (Kafka's replication-offset-checkpoint).

Not thread-safe: use it from the partition's event loop, like Partition.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence

from ingest.log.local_log import LocalLog, SegmentInfo
from ingest.unified.producer_appends import PendingAppends
from ingest.unified.producer_state import ProducerStateManager
from logformat.frame import iter_headers

HW_CHECKPOINT = "high-watermark"


def _wall_ms() -> int:
    return int(time.time() * 1000)


class UnifiedLog:
    def __init__(self, local: LocalLog) -> None:
        """Rebuild the producer state of the opened `local` log (checkpoint + replay)."""
        self.local = local
        self.producers = ProducerStateManager(local.log_index, local.topic_id, local.partition)
        self.producers.rebuild(local)
        self.producers.expire(_wall_ms())

    # -- reading ----------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self.local.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.local.log_start_offset

    @property
    def latest_epoch(self) -> int:
        return self.local.latest_epoch

    def leader_epochs(self) -> list[tuple[int, int]]:
        return self.local.leader_epochs()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        return self.local.end_offset_for_epoch(epoch)

    # -- leader -----------------------------------------------------------------------------

    def begin_epoch(self, epoch: int) -> int:
        """Start leading in `epoch` at the log end; returns that offset (the epoch's start)."""
        self.local.begin_epoch(epoch)
        return self.local.log_end_offset

    def begin_appends(self) -> PendingAppends:
        """One group commit's producer-state overlay, from the current log end."""
        return self.producers.begin(self.local.log_end_offset)

    def append_as_leader(
        self, frames: Sequence[bytearray], pending: PendingAppends, leader_epoch: int
    ) -> list[tuple[int, int]]:
        """Append `frames` (every one staged in `pending`, in order) and apply the staged
        producer state with the offsets they got. Raises as LocalLog.append does, then
        with nothing applied."""
        ranges = self.local.append(frames, leader_epoch, _wall_ms())
        pending.commit(ranges)
        self.producers.maybe_checkpoint(self.local)
        return ranges

    # -- follower ---------------------------------------------------------------------------

    def append_replicated(self, data: memoryview) -> None:
        """Copy a leader's frames; their headers update the producer state (a new leader
        needs the sequences too)."""
        if not data.nbytes:
            return
        self.local.append_replicated(data)
        for _, header in iter_headers(data):
            self.producers.apply_frame(header)
        self.producers.maybe_checkpoint(self.local)

    def truncate_to(self, offset: int) -> int:
        """Cut the log at `offset` (a frame boundary at or below it) and drop the producer
        state of the frames cut. Returns the new log end offset."""
        new_leo = self.local.truncate_to(offset)
        self.producers.on_truncate(self.local)
        return new_leo

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log, restarting it at `offset`, with no producer state."""
        self.local.truncate_fully_and_start_at(offset)
        self.producers.reset(self.local)

    # -- retention --------------------------------------------------------------------------

    def advance_log_start(self, offset: int) -> None:
        """Producer state is kept when its frames go (KIP-360): only the log moves."""
        self.local.advance_log_start(offset)

    def delete_segments_before(self, offset: int) -> list[SegmentInfo]:
        return self.local.delete_segments_before(offset)

    # -- high-watermark checkpoint ----------------------------------------------------------

    def _hw_path(self) -> str:
        return os.path.join(self.local.dir, HW_CHECKPOINT)

    def read_hw_checkpoint(self) -> int:
        """The last checkpointed high watermark, capped at the log end (0 without one)."""
        try:
            with open(self._hw_path()) as f:
                hw = int(f.read().strip() or 0)
        except (OSError, ValueError):
            hw = 0
        return min(hw, self.local.log_end_offset)

    def checkpoint_hw(self, high_watermark: int) -> None:
        """Persist the high watermark, atomically (write a temporary file, rename it)."""
        tmp = self._hw_path() + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(high_watermark))
        os.replace(tmp, self._hw_path())

    def close(self, high_watermark: int) -> None:
        """Checkpoint the high watermark and the producer state, as far as the disk lets us
        (the partition log itself is closed by the LogManager)."""
        with contextlib.suppress(OSError):
            self.checkpoint_hw(high_watermark)
        with contextlib.suppress(Exception):
            self.producers.checkpoint(self.local)
