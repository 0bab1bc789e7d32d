"""One partition's hot log: segments + the broker index (Kafka's LocalLog, docs/design.md §3).

Offsets are assigned here (dense, from log_end_offset), frames are written to the active segment
with one system call per group commit, and one index WriteBatch follows. Readers need no lock:
they snapshot the segment list and the end offset, and never look past what the index knew.
Writers (append, roll, truncate, retention) are serialized by a lock. Crash recovery at open
is in log_loader.py; `open` installs its result. This class owns the state (offsets, segment
list, lock); the steps that need none of it are in log_append.py, log_read.py (the lock-free
read path), log_truncation.py, segment_swap.py (the cleaner's swap) and epoch_cache.py.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from rocksdict import WriteBatch

from ingest.log import frame_repair, log_read, log_truncation, segment_swap
from ingest.log.epoch_cache import Epochs, LeaderEpochCache
from ingest.log.index import LogIndex, PartitionCheckpoint, PartitionIndex, SegmentMeta
from ingest.log.log_append import Entry, number_frames, replicated_frames, write_groups
from ingest.log.log_loader import RecoveryResult, prepare_dir, recover
from ingest.log.log_read import LogView, ReadResult
from ingest.log.log_segments import LogSegments
from ingest.log.log_types import NO_MAX_TIMESTAMP as _NO_MAX
from ingest.log.log_types import LogConfig, PartitionDir, SegmentInfo
from ingest.log.log_types import now_ms as _now_ms
from ingest.log.segment import BytesLike, Segment, remove_dir
from ingest.log.storage_errors import storage_error
from logformat.errors import ErrorCode, TierlogError

__all__ = ["LocalLog", "LogConfig", "ReadResult", "SegmentInfo"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class LocalLog:
    def __init__(self, where: PartitionDir, index: LogIndex, config: LogConfig) -> None:
        """An empty, unopened log: use `open`."""
        self.dir, self.topic, self.topic_id, self.partition = where
        self.config = config
        self.log_index = index  # broker-wide: makes and writes batches (producer state shares it)
        self.index: PartitionIndex = index.partition(self.topic_id, self.partition)
        self.epochs = LeaderEpochCache(self.index, index)
        self._segs = LogSegments()
        self._lso = self._leo = self._checkpoint = 0
        self._max_ts = _NO_MAX  # running max timestamp: the time index's last key
        self._lock = threading.RLock()
        self._failed: Exception | None = None
        self._closed = False
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
    ) -> LocalLog:
        """Open (creating or recovering) the log of `partition` in `directory`."""
        where = PartitionDir(directory, topic, topic_id, partition)
        plog = cls(where, index, config)
        prepare_dir(where, index)
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
    def active_segment(self) -> Segment:
        return self._segs.active

    @property
    def latest_epoch(self) -> int:
        return self.epochs.latest

    @property
    def failure(self) -> Exception | None:
        """Why the log went offline (a failed write or swap), or None while it is usable."""
        return self._failed

    @property
    def lock(self) -> threading.RLock:
        """The writers' lock (the cleaner's swap takes it; header replays hold it)."""
        return self._lock

    def segments(self) -> list[SegmentInfo]:
        return self._segs.infos()

    def leader_epochs(self) -> Epochs:
        return self.epochs.epochs()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        """Kafka's OffsetsForLeaderEpoch: (largest epoch <= epoch, the offset where it ended)."""
        return self.epochs.end_offset_for(epoch, self._leo)

    def begin_epoch(self, epoch: int) -> None:
        """Record that `epoch` starts at the current log end (a new leader, before appending).

        Kafka does this on becoming leader so that followers asking for the end of an older
        epoch learn the boundary even before the new leader has appended anything.
        """
        with self._lock:
            self._check_usable()
            self.epochs.begin(epoch, self._leo)

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
            self._write(frames, entries, self.epochs.new_epoch(leader_epoch, self._leo), now_ms)
            return out

    def append_replicated(
        self, frame_bytes: BytesLike, now_ms: int | None = None
    ) -> list[tuple[int, int]]:
        """Append frames that already carry offsets (a follower copying its leader)."""
        with self._lock:
            self._check_usable()
            bufs, entries, epochs, out = replicated_frames(
                frame_bytes, self._leo, self.epochs.latest
            )
            self._write(bufs, entries, epochs, _now_ms() if now_ms is None else now_ms)
            return out

    def _write(
        self, bufs: Sequence[BytesLike], entries: list[Entry], epochs: Epochs, now_ms: int
    ) -> None:
        batch = self.log_index.batch()
        try:
            seg = self._segs.active
            if self._roll_due(seg, now_ms):
                seg = self._roll(batch, entries[0][0])
            limits = (self.config.segment_bytes, now_ms, self._max_ts)
            roll = functools.partial(self._roll, batch)
            seg, max_ts = write_groups(self.index, batch, seg, (bufs, entries), limits, roll)
            self.epochs.put(batch, epochs)
            self.log_index.write(batch)
        except Exception as exc:  # Kafka's offline log dir: the file may hold frames the index
            # and LEO do not; appending on would reuse offsets. Reopening repairs both.
            raise self._went_offline(exc, "append failed, log offline") from exc
        self._max_ts = max_ts
        self.epochs.advance(epochs)
        self._leo = seg.next_offset

    # --- rolling ---
    def _roll_due(self, seg: Segment, now_ms: int) -> bool:
        """Has segment.ms passed since the segment's first append?"""
        return bool(seg.size) and now_ms - seg.created_ms >= self.config.segment_ms

    def maybe_roll(self, now_ms: int) -> bool:
        """Roll the active segment if segment.ms has passed since its first append."""
        with self._lock:
            if self._closed or self._failed or not self._roll_due(self._segs.active, now_ms):
                return False
            return self.roll()

    def roll(self) -> bool:
        """Seal the active segment (if it holds anything) and start a new one at the LEO."""
        with self._lock:
            self._check_usable()
            if not self._segs.active.size:
                return False
            with self._batch(state=False) as batch:
                self._roll(batch, self._leo)
            return True

    def _roll(self, batch: WriteBatch, base: int) -> Segment:
        old = self._segs.active
        old.seal()  # fsync before the new file exists: everything below base is durable
        meta = SegmentMeta(old.created_ms, old.max_timestamp, True)
        self.index.put_segment(batch, old.base_offset, meta)
        new = Segment.create(self.dir, base)
        self._segs.add(new)
        self._checkpoint = base
        self._put_state(batch, clean=False)
        return new

    # --- read (lock-free: log_read.py) ---
    def _view(self) -> LogView:
        segs = self._segs
        return LogView(self._leo, self._lso, segs.segments, segs.bases)

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> ReadResult:
        """Whole frames from the one holding `offset`, up to max_bytes (at least one frame).

        After key compaction a frame holds rows only for its surviving offsets: an offset the
        cleaner removed is read as the frame that spanned it (its next records)."""
        return self._consistent(
            lambda: log_read.read(self.index, self._view(), offset, max_bytes, max_offset)
        )

    def offset_for_timestamp(self, ts_ms: int) -> int | None:
        """First offset whose record timestamp is >= ts_ms (Kafka's ListOffsets by time)."""
        return self._consistent(
            lambda: log_read.offset_for_timestamp(self.index, self._view, ts_ms)
        )

    def _consistent(self, read: Callable[[], _T]) -> _T:
        """Run a lock-free read, again if a cleaner swap ran meanwhile (log_read.consistent)."""
        return log_read.consistent(lambda: self._swap_gen, read, self.dir)

    def replace_frame(self, offset: int, data: bytes) -> bool:
        """Write a peer's whole copy over this log's corrupt frame at `offset` (checked to be
        that frame: frame_repair.py); False when the frame here is whole already."""
        with self._lock:
            self._check_usable()
            return frame_repair.replace(
                self.index, self._view(), self.leader_epochs(), offset, data
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
                self.epochs.truncate_from_end(offset)
                return self._leo
            entry = self.index.frame_floor(offset)
            if offset <= self._lso or entry is None:
                self.truncate_fully_and_start_at(offset)
                return self._leo
            new_leo = entry.base_offset
            with self._batch() as batch:
                segs, remaining = log_truncation.cut_tail(
                    self.index, batch, self._segs.segments, self._segs.bases, entry
                )
                self._segs.set(segs)
                self._leo, self._lso = new_leo, min(self._lso, new_leo)
                self._checkpoint = min(self._checkpoint, segs[-1].base_offset)
            self._max_ts = _NO_MAX if remaining is None else remaining
            self.epochs.reload()
            return new_leo

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the (empty) log at `offset`."""
        with self._lock:
            for seg in self._segs.segments:
                seg.delete()
            self._segs.set([Segment.create(self.dir, offset)])
            with self._batch() as batch:
                log_truncation.clear(self.index, batch)
                self._lso = self._leo = self._checkpoint = offset
                self._max_ts, self.epochs.latest = _NO_MAX, -1

    def advance_log_start(self, offset: int) -> None:
        """Move the log start offset forward (retention, delete-records); files stay."""
        with self._lock:
            if offset > self._leo:
                raise TierlogError(ErrorCode.OFFSET_OUT_OF_RANGE, f"{offset} > LEO {self._leo}")
            if offset <= self._lso:
                return
            self._lso = offset
            with self._batch() as batch:
                self.index.truncate_epochs_from_start(batch, offset)

    def delete_segments_before(self, offset: int) -> list[SegmentInfo]:
        """Delete the sealed segments whose records are all below `offset` (never the active)."""
        with self._lock:
            if self._closed:  # dropped meanwhile: its files and index entries are gone
                return []
            n = log_truncation.segments_below(self._segs.segments, offset)
            if not n:
                return []
            gone = self.segments()[:n]
            self._segs.drop_head(n)  # readers in flight keep their descriptors
            first = self._segs.segments[0].base_offset
            self._lso = max(self._lso, first)
            with self._batch() as batch:
                log_truncation.drop_head(self.index, batch, first, self._lso)
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
            segs = self._segs.segments
            i = segment_swap.find(segs, self._segs.bases, old)
            if self._closed or self._failed is not None or i is None:
                segment_swap.discard(cleaned)
                return False
            mine = segs[i : i + len(old)]
            for seg in mine:  # readers holding these keep the old inodes from here on
                _ = seg.fd
            swap = segment_swap.commit(cleaned)
            self._swap_gen += 1
            try:
                new = segment_swap.install_cleaned(swap, mine, frames, self.log_index, self.index)
                self._segs.set([*segs[:i], new, *segs[i + len(old) :]])
            except Exception as exc:
                self._failed = exc  # the files are ahead of the index: reopening repairs it
                log.exception("segment swap failed, log offline", extra={"dir": self.dir})
                raise
            finally:
                self._swap_gen += 1
            self._segs.retire(mine)
            return True

    def reap_deleted(self) -> None:
        """Close the descriptors of deleted segments whose grace period has passed."""
        with self._lock:
            self._segs.reap()

    # --- lifecycle ---
    def flush(self) -> None:
        self._segs.active.flush()

    def close(self) -> None:
        """fsync the active segment and record a clean shutdown (no rescan at next open)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._failed is None:
                self._segs.active.flush()
                with self._batch(state=False) as batch:
                    self._put_state(batch, clean=True)
            self._segs.close()

    def delete(self) -> None:
        """Remove the partition: its files and every index entry."""
        with self._lock:
            self._closed = True
            self._segs.close()
            self.log_index.drop_partition(self.topic_id, self.partition)
            remove_dir(self.dir)

    def _check_usable(self) -> None:
        if self._closed:
            raise TierlogError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"log {self.dir} is closed")
        if self._failed is not None:
            raise TierlogError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.dir} is offline")

    @contextlib.contextmanager
    def _batch(self, *, state: bool = True) -> Iterator[WriteBatch]:
        """One index batch, written when the block ends; with `state`, the partition state
        (log start, recovery checkpoint, not clean) as the block left it goes with it. A
        failed write in it (a roll's fsync on a full disk) takes the log offline."""
        batch = self.log_index.batch()
        try:
            yield batch
            if state:
                self._put_state(batch, clean=False)
            self.log_index.write(batch)
        except OSError as exc:
            raise self._went_offline(exc, "log write failed, log offline") from exc

    def _went_offline(self, exc: Exception, what: str) -> TierlogError:
        self._failed = exc
        log.exception(what, extra={"topic": self.topic, "partition": self.partition})
        return storage_error(exc)

    def _put_state(self, batch: WriteBatch, *, clean: bool) -> None:
        self.index.put_state(batch, PartitionCheckpoint(self._lso, self._checkpoint, clean))

    def _install(self, r: RecoveryResult) -> None:
        """Take over the state `recover` brought back; log what it did."""
        self._segs.set(r.segments)
        self._lso, self._leo, self._checkpoint = (
            r.log_start_offset,
            r.log_end_offset,
            r.recovery_checkpoint,
        )
        self._max_ts = _NO_MAX if r.max_timestamp is None else r.max_timestamp
        self.epochs.latest = r.latest_epoch
        r.log_to(log, self.topic, self.partition)
