"""One partition's hot log: segments + the broker index (Kafka's LocalLog/UnifiedLog, DESIGN §3).

Offsets are assigned here (dense, from log_end_offset), frames are written to the active segment
with one system call per group commit, and one index WriteBatch follows. Readers need no lock:
they snapshot the segment list and the end offset, and never look past what the index knew.
Writers (append, roll, truncate, retention) are serialized by a lock. Crash recovery at open
is in log_recovery.py; `open` installs its result. This class owns the state (offsets, segment
list, lock); the steps that need none of it are in log_append.py, log_read.py (the lock-free
read path), log_truncation.py and segment_swap.py (the cleaner's swap).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from rocksdict import WriteBatch

from ingest.log import log_read, log_truncation, segment_swap
from ingest.log.index import LogIndex, PartitionIndex, PartitionState, SegmentMeta
from ingest.log.log_append import (
    Entry,
    group_end,
    index_group,
    number_frames,
    replicated_frames,
)
from ingest.log.log_loader import RecoveryResult, prepare_dir, recover
from ingest.log.log_read import LogView, ReadResult
from ingest.log.log_types import NO_MAX_TIMESTAMP as _NO_MAX
from ingest.log.log_types import LogConfig, SegmentInfo
from ingest.log.log_types import now_ms as _now_ms
from ingest.log.segment import BytesLike, Graveyard, Segment, remove_dir
from logformat.errors import ErrorCode, TierlogError

__all__ = ["LogConfig", "PartitionLog", "ReadResult", "SegmentInfo"]

log = logging.getLogger(__name__)


class PartitionLog:
    def __init__(
        self,
        directory: str,
        topic: str,
        topic_id: str,
        partition: int,
        index: LogIndex,
        config: LogConfig,
    ) -> None:
        self.dir, self.topic, self.topic_id, self.partition = directory, topic, topic_id, partition
        self.config = config
        self._index = index
        self.index: PartitionIndex = index.partition(topic_id, partition)
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._lso = self._leo = self._checkpoint = 0
        self._max_ts = _NO_MAX  # running max timestamp: the time index's last key
        self._latest_epoch = -1
        self._lock = threading.RLock()
        self._failed: Exception | None = None
        self._closed = False
        self._graveyard = Graveyard()
        # Seqlock for lock-free readers against a cleaner swap (odd while one is under way):
        # the segment list and the index change together, a read that saw both sides retries.
        self._swap_gen = 0

    @classmethod
    def open(
        cls,
        directory: str,
        topic: str,
        topic_id: str,
        partition: int,
        index: LogIndex,
        config: LogConfig,
    ) -> PartitionLog:
        plog = cls(directory, topic, topic_id, partition, index, config)
        prepare_dir(directory, topic, topic_id, partition, index)
        plog._install(recover(directory, index, plog.index))
        return plog

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    # --- properties ---
    @property
    def log_start_offset(self) -> int:
        return self._lso

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def log_index(self) -> LogIndex:
        """The broker-wide index this log writes to (producer state shares it)."""
        return self._index

    @property
    def active_segment(self) -> Segment:
        return self._segments[-1]

    @property
    def latest_epoch(self) -> int:
        return self._latest_epoch

    @property
    def failure(self) -> Exception | None:
        """Why the log went offline (a failed write or swap), or None while it is usable."""
        return self._failed

    def segments(self) -> list[SegmentInfo]:
        return [SegmentInfo.of(s) for s in self._segments]

    def leader_epochs(self) -> list[tuple[int, int]]:
        return self.index.epochs()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        """Kafka's OffsetsForLeaderEpoch: (largest epoch <= epoch, the offset where it ended)."""
        return self.index.end_offset_for_epoch(epoch, self._leo)

    def begin_epoch(self, epoch: int) -> None:
        """Record that `epoch` starts at the current log end (a new leader, before appending).

        Kafka does this on becoming leader so that followers asking for the end of an older
        epoch learn the boundary even before the new leader has appended anything.
        """
        with self._lock:
            self._check_usable()
            if epoch <= self._latest_epoch:
                return
            batch = self._index.batch()
            self.index.put_epoch(batch, epoch, self._leo)
            self._index.write(batch)
            self._latest_epoch = epoch

    # --- append ---
    def append(
        self, frames: Sequence[bytearray], leader_epoch: int, now_ms: int
    ) -> list[tuple[int, int]]:
        """Assign offsets to `frames` (in place) and append them: one write, one index batch."""
        with self._lock:
            self._check_usable()
            if not frames:
                return []
            entries, out = number_frames(frames, self._leo, leader_epoch)
            epochs = [(leader_epoch, self._leo)] if leader_epoch > self._latest_epoch else []
            self._write(frames, entries, epochs, now_ms)
            return out

    def append_replicated(
        self, frame_bytes: BytesLike, now_ms: int | None = None
    ) -> list[tuple[int, int]]:
        """Append frames that already carry offsets (a follower copying its leader)."""
        with self._lock:
            self._check_usable()
            bufs, entries, epochs, out = replicated_frames(
                frame_bytes, self._leo, self._latest_epoch
            )
            self._write(bufs, entries, epochs, _now_ms() if now_ms is None else now_ms)
            return out

    def _write(
        self,
        bufs: Sequence[BytesLike],
        entries: list[Entry],
        epochs: list[tuple[int, int]],
        now_ms: int,
    ) -> None:
        idx, batch = self.index, self._index.batch()
        try:
            seg = self._segments[-1]
            if seg.size and now_ms - seg.created_ms >= self.config.segment_ms:
                seg = self._roll(batch, entries[0][0])
            limit, n, i, max_ts = self.config.segment_bytes, len(bufs), 0, self._max_ts
            while i < n:
                j, total = group_end(entries, i, limit - seg.size, seg.size == 0)
                if j == i:
                    seg = self._roll(batch, entries[i][0])
                    continue
                pos = seg.append(bufs[i:j], total)
                if seg.created_ms < 0:
                    seg.created_ms = now_ms
                max_ts = index_group(idx, batch, seg, entries[i:j], pos, max_ts)
                i = j
            for epoch, start in epochs:
                idx.put_epoch(batch, epoch, start)
            self._index.write(batch)
        except Exception as exc:  # OSError from the file, or RocksDB's own errors
            # Like Kafka taking a log dir offline: the file may hold frames the index and LEO
            # do not; appending on would reuse offsets. Reopening (recovery) repairs both.
            self._failed = exc
            log.exception(
                "append failed, log offline topic=%s partition=%d", self.topic, self.partition
            )
            raise TierlogError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc
        self._max_ts = max_ts
        if epochs:
            self._latest_epoch = epochs[-1][0]
        self._leo = seg.next_offset

    # --- rolling ---
    def maybe_roll(self, now_ms: int) -> bool:
        """Roll the active segment if segment.ms has passed since its first append."""
        with self._lock:
            seg = self._segments[-1]
            if (
                self._closed
                or self._failed
                or not seg.size
                or (now_ms - seg.created_ms < self.config.segment_ms)
            ):
                return False
            return self.roll()

    def roll(self) -> bool:
        """Seal the active segment (if it holds anything) and start a new one at the LEO."""
        with self._lock:
            self._check_usable()
            if not self._segments[-1].size:
                return False
            batch = self._index.batch()
            self._roll(batch, self._leo)
            self._index.write(batch)
            return True

    def _roll(self, batch: WriteBatch, base: int) -> Segment:
        old = self._segments[-1]
        old.seal()  # fsync before the new file exists: everything below base is durable
        meta = SegmentMeta(old.created_ms, old.max_timestamp, True)
        self.index.put_segment(batch, old.base_offset, meta)
        new = Segment.create(self.dir, base)
        self._set_segments([*self._segments, new])
        self._checkpoint = base
        self._put_state(batch, clean=False)
        return new

    @property
    def lock(self) -> threading.RLock:
        """The writers' lock (the cleaner's swap takes it; header replays hold it)."""
        return self._lock

    # --- read (lock-free: log_read.py) ---
    def _view(self) -> LogView:
        return LogView(self._leo, self._lso, self._segments, self._bases)

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> ReadResult:
        """Whole frames from the one holding `offset`, up to max_bytes (at least one frame).

        After key compaction a frame holds rows only for its surviving offsets: an offset the
        cleaner removed is read as the frame that spanned it (its next records)."""
        return log_read.consistent(
            lambda: self._swap_gen,
            lambda: log_read.read(self.index, self._view(), offset, max_bytes, max_offset),
            self.dir,
        )

    def offset_for_timestamp(self, ts_ms: int) -> int | None:
        """First offset whose record timestamp is >= ts_ms (Kafka's ListOffsets by time)."""
        return log_read.consistent(
            lambda: self._swap_gen,
            lambda: log_read.offset_for_timestamp(self.index, self._view, ts_ms),
            self.dir,
        )

    # --- truncation and retention ---
    def truncate_to(self, offset: int) -> int:
        """Remove the frames holding offsets >= offset; returns the new log end offset.

        Truncation is at a frame boundary: a frame holding `offset` goes entirely, so the new
        LEO may be below `offset` (as Kafka truncates whole batches).
        """
        with self._lock:
            self._check_usable()
            if offset >= self._leo:
                # No bytes to cut, but an epoch begun at the log end without an append (a
                # leader replaced before it wrote) must go, as Kafka's truncateFromEnd does:
                # kept, it made the leader answer "diverging" to every fetch, forever.
                self._drop_epochs_from(offset)
                return self._leo
            entry = self.index.frame_floor(offset)
            if offset <= self._lso or entry is None:
                self.truncate_fully_and_start_at(offset)
                return self._leo
            new_leo, batch = entry.base_offset, self._index.batch()
            segs, remaining = log_truncation.cut_tail(
                self.index, batch, self._segments, self._bases, entry
            )
            self._set_segments(segs)
            self._leo, self._lso = new_leo, min(self._lso, new_leo)
            self._checkpoint = min(self._checkpoint, segs[-1].base_offset)
            self._put_state(batch, clean=False)
            self._index.write(batch)
            self._max_ts = _NO_MAX if remaining is None else remaining
            self._latest_epoch = max((e for e, _ in self.index.epochs()), default=-1)
            return new_leo

    def _drop_epochs_from(self, offset: int) -> None:
        if all(start < offset for _, start in self.index.epochs()):
            return
        batch = self._index.batch()
        self.index.truncate_epochs_from_end(batch, offset)
        self._index.write(batch)
        self._latest_epoch = max((e for e, _ in self.index.epochs()), default=-1)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the (empty) log at `offset`."""
        with self._lock:
            for seg in self._segments:
                seg.delete()
            self._set_segments([Segment.create(self.dir, offset)])
            batch = self._index.batch()
            log_truncation.clear(self.index, batch)
            self._lso = self._leo = self._checkpoint = offset
            self._max_ts, self._latest_epoch = _NO_MAX, -1
            self._put_state(batch, clean=False)
            self._index.write(batch)

    def advance_log_start(self, offset: int) -> None:
        """Move the log start offset forward (retention, delete-records); files stay."""
        with self._lock:
            if offset > self._leo:
                raise TierlogError(ErrorCode.OFFSET_OUT_OF_RANGE, f"{offset} > LEO {self._leo}")
            if offset <= self._lso:
                return
            self._lso = offset
            batch = self._index.batch()
            self.index.truncate_epochs_from_start(batch, offset)
            self._put_state(batch, clean=False)
            self._index.write(batch)

    def delete_segments_before(self, offset: int) -> list[SegmentInfo]:
        """Delete the sealed segments whose records are all below `offset` (never the active)."""
        with self._lock:
            if self._closed:  # dropped meanwhile: its files and index entries are gone
                return []
            segs = self._segments
            n = log_truncation.segments_below(segs, offset)
            if not n:
                return []
            gone = self.segments()[:n]
            now = time.monotonic()
            self._graveyard.reap(now)
            self._graveyard.bury(segs[:n], now)  # readers in flight keep their descriptors
            self._set_segments(segs[n:])
            first = segs[n].base_offset
            self._lso = max(self._lso, first)
            batch = self._index.batch()
            log_truncation.drop_head(self.index, batch, first, self._lso)
            self._put_state(batch, clean=False)
            self._index.write(batch)
            return gone

    def swap_cleaned(
        self,
        old: Sequence[SegmentInfo],
        cleaned: str,
        frames: Sequence[tuple[int, int, int, int, int]],
    ) -> bool:
        """Replace the sealed segments `old` (consecutive, as the cleaner saw them) by the
        cleaned file `cleaned` covering the same offsets; `frames` are its (base offset,
        position, size, span, max timestamp). False (and the file is dropped) if the log changed
        meanwhile (truncation, retention, close). See segment_swap for the crash protocol."""
        with self._lock:
            segs = self._segments
            i = segment_swap.find(segs, self._bases, old)
            if self._closed or self._failed is not None or i is None:
                segment_swap.discard(cleaned)
                return False
            mine = segs[i : i + len(old)]
            for seg in mine:  # readers holding these keep the old inodes from here on
                _ = seg.fd
            swap = segment_swap.commit(cleaned)
            self._swap_gen += 1
            try:
                new = segment_swap.install_cleaned(swap, mine, frames, self._index, self.index)
                self._set_segments([*segs[:i], new, *segs[i + len(old) :]])
            except Exception as exc:
                self._failed = exc  # the files are ahead of the index: reopening repairs it
                log.exception("segment swap failed, log offline dir=%s", self.dir)
                raise
            finally:
                self._swap_gen += 1
            self._graveyard.reap(time.monotonic())
            self._graveyard.retire(mine, time.monotonic())
            return True

    def reap_deleted(self) -> None:
        """Close the descriptors of deleted segments whose grace period has passed."""
        with self._lock:
            self._graveyard.reap(time.monotonic())

    # --- lifecycle ---
    def flush(self) -> None:
        self._segments[-1].flush()

    def close(self) -> None:
        """fsync the active segment and record a clean shutdown (no rescan at next open)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._failed is None:
                self._segments[-1].flush()
                batch = self._index.batch()
                self._put_state(batch, clean=True)
                self._index.write(batch)
            for seg in self._segments:
                seg.close()
            self._graveyard.close_all()

    def delete(self) -> None:
        """Remove the partition: its files and every index entry."""
        with self._lock:
            self._closed = True
            for seg in self._segments:
                seg.close()
            self._graveyard.close_all()
            self._index.drop_partition(self.topic_id, self.partition)
            remove_dir(self.dir)

    def _check_usable(self) -> None:
        if self._closed:
            raise TierlogError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"log {self.dir} is closed")
        if self._failed is not None:
            raise TierlogError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.dir} is offline")

    def _set_segments(self, segs: list[Segment]) -> None:
        # Replace, never mutate: lock-free readers keep a consistent snapshot.
        self._segments, self._bases = segs, [s.base_offset for s in segs]

    def _put_state(self, batch: WriteBatch, *, clean: bool) -> None:
        self.index.put_state(batch, PartitionState(self._lso, self._checkpoint, clean))

    def _install(self, r: RecoveryResult) -> None:
        """Take over the state `recover` brought back; log what it did."""
        self._set_segments(r.segments)
        self._lso, self._leo, self._checkpoint = (
            r.log_start_offset,
            r.log_end_offset,
            r.recovery_checkpoint,
        )
        self._max_ts = _NO_MAX if r.max_timestamp is None else r.max_timestamp
        self._latest_epoch = r.latest_epoch
        r.log_to(log, self.topic, self.partition)
