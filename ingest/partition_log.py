"""One partition's hot log: segments + the broker index (Kafka's LocalLog/UnifiedLog, DESIGN §3).

Offsets are assigned here (dense, from log_end_offset), frames are written to the active segment
with one system call per group commit, and one index WriteBatch follows. Readers need no lock:
they snapshot the segment list and the end offset, and never look past what the index knew.
Writers (append, roll, truncate, retention) are serialized by a lock. Crash recovery at open
is in log_recovery.py; `open` installs its result.
"""

from __future__ import annotations

import bisect
import logging
import struct
import threading
import time
from collections.abc import Sequence
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from rocksdict import WriteBatch

from ingest.index import LogIndex, PartitionIndex, PartitionState, SegmentMeta
from ingest.log_recovery import RecoveryResult, prepare_dir, recover
from ingest.segment import NO_TIMESTAMP, BytesLike, Graveyard, Segment, remove_dir
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import HEADER_SIZE, MAGIC, CorruptFrameError, FrameHeader, assign, scan
from logformat.frame import decode_records as _decode

log = logging.getLogger(__name__)

_META = struct.Struct("<4s12xI6xi22xq")  # magic, payload_length, record_count, max_timestamp
_NO_MAX = -(1 << 63)


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


ReadResult = list[tuple[FrameHeader, memoryview]]
_Entry = tuple[int, int, int, int]  # base offset, record count, max timestamp, size


def _now_ms() -> int:
    return int(time.time() * 1000)


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

    def segments(self) -> list[SegmentInfo]:
        return [
            SegmentInfo(
                s.base_offset,
                s.next_offset,
                s.size,
                s.sealed,
                s.path,
                s.max_timestamp,
                s.created_ms,
            )
            for s in self._segments
        ]

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
            entries: list[_Entry] = []
            out: list[tuple[int, int]] = []
            off = self._leo
            unpack = _META.unpack_from
            for frame in frames:
                size = len(frame)
                try:
                    magic, payload_len, count, max_ts = unpack(frame)
                except struct.error:
                    magic = None
                if magic != MAGIC or size != HEADER_SIZE + payload_len or count <= 0:
                    raise TierlogError(ErrorCode.CORRUPT_MESSAGE, "not a whole frame")
                assign(frame, off, leader_epoch)
                entries.append((off, count, max_ts, size))
                out.append((off, off + count - 1))
                off += count
            epochs = [(leader_epoch, self._leo)] if leader_epoch > self._latest_epoch else []
            self._write(frames, entries, epochs, now_ms)
            return out

    def append_replicated(
        self, frame_bytes: BytesLike, now_ms: int | None = None
    ) -> list[tuple[int, int]]:
        """Append frames that already carry offsets (a follower copying its leader)."""
        with self._lock:
            self._check_usable()
            result = scan(frame_bytes)
            if result.torn or not result.frames:
                raise TierlogError(ErrorCode.CORRUPT_MESSAGE, "replicated bytes are not frames")
            view = memoryview(frame_bytes)
            bufs, entries, epochs = [], [], []
            expected, latest = self._leo, self._latest_epoch
            for pos, h in result.frames:
                if h.base_offset != expected:
                    raise TierlogError(
                        ErrorCode.OFFSET_OUT_OF_RANGE,
                        f"frame at {h.base_offset} does not continue the log at {expected}",
                    )
                if h.leader_epoch > latest:
                    epochs.append((h.leader_epoch, h.base_offset))
                    latest = h.leader_epoch
                bufs.append(view[pos : pos + h.size])
                entries.append((h.base_offset, h.record_count, h.max_timestamp, h.size))
                expected = h.next_offset
            self._write(bufs, entries, epochs, _now_ms() if now_ms is None else now_ms)
            return [(h.base_offset, h.last_offset) for _, h in result.frames]

    def _write(
        self,
        bufs: Sequence[BytesLike],
        entries: list[_Entry],
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
                # Greedy group for this segment; a lone oversized frame goes into an empty one.
                room, j, total = limit - seg.size, i, 0
                while j < n and (total + entries[j][3] <= room or (j == i and seg.size == 0)):
                    total += entries[j][3]
                    j += 1
                if j == i:
                    seg = self._roll(batch, entries[i][0])
                    continue
                pos = seg.append(bufs[i:j], total)
                if seg.created_ms < 0:
                    seg.created_ms = now_ms
                for base, count, frame_max, size in entries[i:j]:
                    idx.put_frame(batch, base, seg.base_offset, pos, size, count, frame_max)
                    pos += size
                    if frame_max > max_ts:  # time index keeps only running-max increases
                        idx.put_time(batch, frame_max, base)
                        max_ts = frame_max
                    if frame_max > seg.max_timestamp:
                        seg.max_timestamp = frame_max
                last = entries[j - 1]
                seg.next_offset = last[0] + last[1]
                idx.put_segment(
                    batch, seg.base_offset, SegmentMeta(seg.created_ms, seg.max_timestamp, False)
                )
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

    # --- read ---
    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> ReadResult:
        """Whole frames from the one holding `offset`, up to max_bytes (at least one frame)."""
        leo, lso, segs, bases = self._leo, self._lso, self._segments, self._bases
        if offset < lso or offset > leo:
            raise TierlogError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} not in [{lso}, {leo}]",
                log_start_offset=lso,
                log_end_offset=leo,
            )
        limit = leo if max_offset is None else min(max_offset, leo)
        entry = self.index.frame_floor(offset) if offset < limit else None
        if entry is None:
            return []
        i = bisect.bisect_right(bases, entry.segment_base) - 1
        if i < 0 or bases[i] != entry.segment_base:  # deleted by retention meanwhile
            raise TierlogError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {offset} was deleted")
        seg, pos, need = segs[i], entry.position, entry.size
        out: ReadResult = []
        taken = 0
        while True:
            avail = seg.size - pos
            if avail <= 0:
                i += 1
                if i >= len(segs):
                    return out
                seg, pos = segs[i], 0
                continue
            budget = max_bytes - taken if out else max(max_bytes, need)
            if min(avail, budget) < HEADER_SIZE:
                return out
            before = len(out)
            try:
                used, more = seg.read_frames(pos, min(avail, budget), limit, offset, out)
            except CorruptFrameError as exc:
                raise TierlogError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc
            taken += sum(h.size for h, _ in out[before:])
            if more < 0 or (out and more):  # at the limit, or the next frame does not fit
                return out
            pos, need = pos + used, more

    def offset_for_timestamp(self, ts_ms: int) -> int | None:
        """First offset whose record timestamp is >= ts_ms (Kafka's ListOffsets by time)."""
        first = self.index.time_lookup(ts_ms)
        if first is None:
            return None
        leo, start, segs, bases = self._leo, max(first, self._lso), self._segments, self._bases
        floor = self.index.frame_floor(start)
        for entry in self.index.frames(floor.base_offset if floor else start):
            if entry.base_offset >= leo:
                return None
            if entry.max_timestamp < ts_ms or entry.next_offset <= start:
                continue
            seg = segs[bisect.bisect_right(bases, entry.segment_base) - 1]
            batch = _decode(seg.read(entry.position, entry.size), verify=False)
            deltas = batch.column(0)
            mask = pc.and_(
                pc.greater_equal(batch.column(1).cast(pa.int64()), ts_ms),
                pc.greater_equal(deltas, start - entry.base_offset),
            )
            row = pc.index(mask, True).as_py()
            if row >= 0:
                return int(entry.base_offset + deltas[row].as_py())
        return None

    # --- truncation and retention ---
    def truncate_to(self, offset: int) -> int:
        """Remove the frames holding offsets >= offset; returns the new log end offset.

        Truncation is at a frame boundary: a frame holding `offset` goes entirely, so the new
        LEO may be below `offset` (as Kafka truncates whole batches).
        """
        with self._lock:
            self._check_usable()
            if offset >= self._leo:
                return self._leo
            entry = self.index.frame_floor(offset)
            if offset <= self._lso or entry is None:
                self.truncate_fully_and_start_at(offset)
                return self._leo
            new_leo = entry.base_offset
            i = self._bases.index(entry.segment_base)
            for dead in self._segments[i + 1 :]:
                dead.delete()
            seg = self._segments[i]
            seg.truncate(entry.position)
            seg.next_offset, seg.sealed = new_leo, False
            seg.max_timestamp = max(
                (e.max_timestamp for e in self.index.frames(seg.base_offset, new_leo)),
                default=NO_TIMESTAMP,
            )
            if not seg.size:
                seg.created_ms = NO_TIMESTAMP
            self._set_segments(self._segments[: i + 1])
            batch = self._index.batch()
            self.index.drop_frames(batch, new_leo)
            remaining = self.index.truncate_time(batch, new_leo)
            self.index.truncate_epochs_from_end(batch, new_leo)
            self.index.put_segment(
                batch, seg.base_offset, SegmentMeta(seg.created_ms, seg.max_timestamp, False)
            )
            self._leo, self._lso = new_leo, min(self._lso, new_leo)
            self._checkpoint = min(self._checkpoint, seg.base_offset)
            self._put_state(batch, clean=False)
            self._index.write(batch)
            self._max_ts = _NO_MAX if remaining is None else remaining
            self._latest_epoch = max((e for e, _ in self.index.epochs()), default=-1)
            return new_leo

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the (empty) log at `offset`."""
        with self._lock:
            for seg in self._segments:
                seg.delete()
            self._set_segments([Segment.create(self.dir, offset)])
            batch = self._index.batch()
            self.index.drop_frames(batch, 0)
            self.index.truncate_time(batch, 0)
            self.index.truncate_epochs_from_end(batch, 0)
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
            n = 0
            while n < len(segs) - 1 and segs[n].next_offset <= offset:
                n += 1
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
            self.index.drop_frames(batch, 0, first)
            self.index.prune_time(batch, self._lso)
            self.index.truncate_epochs_from_start(batch, self._lso)
            self._put_state(batch, clean=False)
            self._index.write(batch)
            return gone

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
        log.log(
            logging.WARNING if r.repaired else logging.INFO,
            "log recovered topic=%s partition=%d segments=%d log_start=%d log_end=%d "
            "clean=%s full_rebuild=%s truncated_bytes=%d frames_reindexed=%d "
            "entries_removed=%d segments_deleted=%d",
            self.topic,
            self.partition,
            len(r.segments),
            r.log_start_offset,
            r.log_end_offset,
            r.clean_shutdown,
            r.full_rebuild,
            r.truncated_bytes,
            r.frames_reindexed,
            r.entries_removed,
            r.segments_deleted,
        )
