"""The broker's index: ONE RocksDB (rocksdict) per broker at `{data_dir}/index` (docs/design.md §3).

Keys are `kind (1 byte) + partition key (20 bytes) + suffix`, all integers big-endian, so each
kind of entry of one partition is a contiguous, ordered range:

    kind  suffix                         value
    F     frame base offset u64          segment base u64, position u64, size u32,
                                         record count u32, max timestamp i64
    T     running-max timestamp (i64^sign)  frame base offset u64   (Kafka's time index)
    S     -                              version u8, log start i64, recovery checkpoint i64,
                                         clean shutdown u8
    G     segment base offset u64        created ms i64, max timestamp i64, sealed u8
    E     leader epoch u32               start offset u64
    P     producer id u64                opaque bytes (producer state, owned by the appender)

The partition key is the topic id (uuid, 16 bytes) + partition (u32): a deleted and re-created
topic of the same name never sees its predecessor's entries. Segment files are the source of
truth and everything here can be rebuilt from them, so writes skip the WAL fsync (the WAL
itself stays on, so a killed process keeps a consistent index).
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Iterator
from typing import NamedTuple, cast

from rocksdict import Rdict, WriteBatch

from ingest.log.index_db import IndexDb

log = logging.getLogger(__name__)

FRAME, TIME, STATE, SEGMENT, EPOCH, PRODUCER = b"F", b"T", b"S", b"G", b"E", b"P"
_KINDS = (FRAME, TIME, STATE, SEGMENT, EPOCH, PRODUCER)
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_FRAME_VALUE = struct.Struct(">QQIIq")
_STATE_VALUE = struct.Struct(">BqqB")
_SEGMENT_VALUE = struct.Struct(">qqB")
_SIGN = 1 << 63
_END = b"\xff" * 9  # sorts after every 8-byte suffix of the same prefix
_STATE_VERSION = 1


def partition_key(topic_id: str, partition: int) -> bytes:
    try:
        tid = uuid.UUID(topic_id).bytes
    except ValueError:  # not a uuid: still a stable 16-byte id
        tid = uuid.uuid5(uuid.NAMESPACE_URL, topic_id).bytes
    return tid + _U32.pack(partition)


def _ts_key(ts: int) -> bytes:
    return _U64.pack((ts + _SIGN) & 0xFFFFFFFFFFFFFFFF)  # signed order as unsigned bytes


class FrameEntry(NamedTuple):
    base_offset: int
    segment_base: int
    position: int
    size: int
    record_count: int
    max_timestamp: int

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count


class PartitionCheckpoint(NamedTuple):
    log_start_offset: int
    recovery_checkpoint: int
    clean_shutdown: bool


class SegmentMeta(NamedTuple):
    created_ms: int
    max_timestamp: int
    sealed: bool


class PartitionIndex:
    """The entries of one partition (topic id + partition), with key prefixes precomputed."""

    def __init__(self, store: IndexDb, pk: bytes) -> None:
        self._store = store
        self.pk = pk
        self._f, self._t, self._s = FRAME + pk, TIME + pk, STATE + pk
        self._g, self._e, self._p = SEGMENT + pk, EPOCH + pk, PRODUCER + pk

    @property
    def _db(self) -> Rdict:
        return self._store.db  # the current handle: the broker's DB may have been reopened

    def _items(self, start: bytes, *, backwards: bool = False) -> Iterator[tuple[bytes, bytes]]:
        # raw mode: keys and values are bytes (rocksdict's stubs say "any key type").
        return cast(
            Iterator[tuple[bytes, bytes]], self._db.items(backwards=backwards, from_key=start)
        )

    # --- frames (offset index) ---
    def put_frame(
        self,
        batch: WriteBatch,
        base: int,
        seg_base: int,
        pos: int,
        size: int,
        count: int,
        max_ts: int,
    ) -> None:
        batch.put(self._f + _U64.pack(base), _FRAME_VALUE.pack(seg_base, pos, size, count, max_ts))

    def _entry(self, key: bytes, value: bytes) -> FrameEntry:
        return FrameEntry(_U64.unpack_from(key, len(self._f))[0], *_FRAME_VALUE.unpack(value))

    def frame_floor(self, offset: int) -> FrameEntry | None:
        """The frame with the greatest base offset <= offset."""
        it = self._db.iter()
        it.seek_for_prev(self._f + _U64.pack(offset))
        if it.valid() and (key := it.key()).startswith(self._f):
            return self._entry(key, it.value())
        return None

    def last_frame(self, before: int | None = None) -> FrameEntry | None:
        """The last frame (with base offset < before, when given)."""
        if before is not None:
            return self.frame_floor(before - 1) if before > 0 else None
        it = self._db.iter()
        it.seek_for_prev(self._f + _END)
        if it.valid() and (key := it.key()).startswith(self._f):
            return self._entry(key, it.value())
        return None

    def frames(self, start: int = 0, end: int | None = None) -> Iterator[FrameEntry]:
        """Frames with start <= base offset < end, in offset order."""
        stop = self._f + (_U64.pack(end) if end is not None else _END)
        for key, value in self._items(self._f + _U64.pack(start)):
            if key >= stop:
                return
            yield self._entry(key, value)

    def drop_frames(self, batch: WriteBatch, start: int, end: int | None = None) -> None:
        """Delete the frame and segment entries for offsets in [start, end)."""
        hi = _U64.pack(end) if end is not None else _END
        batch.delete_range(self._f + _U64.pack(start), self._f + hi)
        batch.delete_range(self._g + _U64.pack(start), self._g + hi)

    # --- time index: running max timestamp -> first frame reaching it ---
    def put_time(self, batch: WriteBatch, max_ts: int, base: int) -> None:
        batch.put(self._t + _ts_key(max_ts), _U64.pack(base))

    def time_lookup(self, ts: int) -> int | None:
        """Base offset of the first frame whose running max timestamp is >= ts."""
        for key, value in self._items(self._t + _ts_key(ts)):
            if key.startswith(self._t):
                return int(_U64.unpack(value)[0])
            return None
        return None

    def last_time(self) -> tuple[int, int] | None:
        """(running max timestamp, frame base offset) of the newest time entry."""
        for key, value in self._items(self._t + _END, backwards=True):
            if not key.startswith(self._t):
                return None
            ts = _U64.unpack_from(key, len(self._t))[0] - _SIGN
            return ts, int(_U64.unpack(value)[0])
        return None

    def truncate_time(self, batch: WriteBatch, from_offset: int) -> int | None:
        """Delete time entries pointing at offsets >= from_offset; return the remaining max."""
        # Entries grow with the offset too, so the doomed ones are the newest: walk backwards.
        for key, value in self._items(self._t + _END, backwards=True):
            if not key.startswith(self._t):
                return None
            if _U64.unpack(value)[0] < from_offset:
                return int(_U64.unpack_from(key, len(self._t))[0] - _SIGN)
            batch.delete(key)
        return None

    # --- partition state ---
    def get_state(self) -> PartitionCheckpoint | None:
        value = self._db.get(self._s)
        if value is None:
            return None
        _, lso, checkpoint, clean = _STATE_VALUE.unpack(value)
        return PartitionCheckpoint(lso, checkpoint, bool(clean))

    def put_state(self, batch: WriteBatch, state: PartitionCheckpoint) -> None:
        batch.put(
            self._s,
            _STATE_VALUE.pack(
                _STATE_VERSION,
                state.log_start_offset,
                state.recovery_checkpoint,
                int(state.clean_shutdown),
            ),
        )

    # --- segments ---
    def put_segment(self, batch: WriteBatch, base: int, meta: SegmentMeta) -> None:
        batch.put(
            self._g + _U64.pack(base),
            _SEGMENT_VALUE.pack(meta.created_ms, meta.max_timestamp, int(meta.sealed)),
        )

    def segment_metas(self) -> dict[int, SegmentMeta]:
        out: dict[int, SegmentMeta] = {}
        for key, value in self._items(self._g):
            if not key.startswith(self._g):
                break
            created, max_ts, sealed = _SEGMENT_VALUE.unpack(value)
            out[_U64.unpack_from(key, len(self._g))[0]] = SegmentMeta(created, max_ts, bool(sealed))
        return out

    def delete_segment(self, batch: WriteBatch, base: int) -> None:
        batch.delete(self._g + _U64.pack(base))

    # --- leader epochs (Kafka's leader-epoch checkpoint) ---
    def put_epoch(self, batch: WriteBatch, epoch: int, start_offset: int) -> None:
        batch.put(self._e + _U32.pack(epoch), _U64.pack(start_offset))

    def epochs(self) -> list[tuple[int, int]]:
        """(epoch, start offset), by epoch."""
        out: list[tuple[int, int]] = []
        for key, value in self._items(self._e):
            if not key.startswith(self._e):
                break
            out.append((_U32.unpack_from(key, len(self._e))[0], _U64.unpack(value)[0]))
        return out

    def end_offset_for_epoch(self, epoch: int, log_end: int) -> tuple[int, int] | None:
        """Kafka's OffsetsForLeaderEpoch: (largest epoch <= epoch, the offset where it ended)."""
        entries = self.epochs()
        for i in range(len(entries) - 1, -1, -1):
            if entries[i][0] <= epoch:
                return entries[i][0], entries[i + 1][1] if i + 1 < len(entries) else log_end
        return None

    def truncate_epochs_from_end(self, batch: WriteBatch, end_offset: int) -> None:
        """Forget epochs that start at or after end_offset (the log was truncated there)."""
        for epoch, start in self.epochs():
            if start >= end_offset:
                batch.delete(self._e + _U32.pack(epoch))

    def truncate_epochs_from_start(self, batch: WriteBatch, start_offset: int) -> None:
        """Log start moved: drop epochs wholly before it and clamp the one that spans it."""
        entries = self.epochs()
        for i, (epoch, start) in enumerate(entries):
            if start >= start_offset:
                break
            nxt = entries[i + 1][1] if i + 1 < len(entries) else None
            if nxt is not None and nxt <= start_offset:
                batch.delete(self._e + _U32.pack(epoch))
            else:
                self.put_epoch(batch, epoch, start_offset)

    # --- producer state (room for idempotence; the value format is the caller's) ---
    def put_producer(self, batch: WriteBatch, producer_id: int, value: bytes) -> None:
        batch.put(self._p + _U64.pack(producer_id), value)

    def get_producer(self, producer_id: int) -> bytes | None:
        value = self._db.get(self._p + _U64.pack(producer_id))
        return None if value is None else bytes(value)

    def producers(self) -> Iterator[tuple[int, bytes]]:
        for key, value in self._items(self._p):
            if not key.startswith(self._p):
                return
            yield _U64.unpack_from(key, len(self._p))[0], value

    def delete_producer(self, batch: WriteBatch, producer_id: int) -> None:
        batch.delete(self._p + _U64.pack(producer_id))

    def prune_time(self, batch: WriteBatch, log_start: int) -> None:
        """Drop time entries below the log start, keeping the last one at or below it.

        That one still bounds lookups: frames between it and the next entry have running max
        equal to its key, so deleting it would make such lookups skip those frames.
        """
        prev = None
        for key, value in self._items(self._t):
            if not key.startswith(self._t) or _U64.unpack(value)[0] > log_start:
                break
            if prev is not None:
                batch.delete(prev)
            prev = key

    # --- recovery helpers ---
    def segment_consistent(self, seg_base: int, next_base: int | None, size: int) -> bool:
        """Cheap check that the index covers a segment file exactly (first and last frame)."""
        last = self.last_frame(next_base)
        if size == 0:
            return last is None or last.base_offset < seg_base
        if last is None or last.segment_base != seg_base or last.position + last.size != size:
            return False
        first = self.frame_floor(seg_base)
        return first is not None and first.base_offset == seg_base and first.position == 0

    def reindex(
        self, batch: WriteBatch, seg_base: int, next_base: int | None, frames: list[FrameEntry]
    ) -> tuple[int, int]:
        """Make the frame entries of [seg_base, next_base) exactly `frames`: (added, removed)."""
        existing = {e.base_offset: e for e in self.frames(seg_base, next_base)}
        added = 0
        for e in frames:
            if existing.pop(e.base_offset, None) != e:
                self.put_frame(
                    batch,
                    e.base_offset,
                    e.segment_base,
                    e.position,
                    e.size,
                    e.record_count,
                    e.max_timestamp,
                )
                added += 1
        for base in existing:
            batch.delete(self._f + _U64.pack(base))
        return added, len(existing)

    def rebuild_time(
        self, batch: WriteBatch, from_offset: int, frames: list[FrameEntry]
    ) -> int | None:
        """Redo the time index from `from_offset` given all frames from there, in order."""
        max_ts = self.truncate_time(batch, from_offset)
        for e in frames:
            if max_ts is None or e.max_timestamp > max_ts:
                self.put_time(batch, e.max_timestamp, e.base_offset)
                max_ts = e.max_timestamp
        return max_ts

    def drop_all(self, batch: WriteBatch) -> None:
        for kind in _KINDS:
            batch.delete_range(kind + self.pk, kind + self.pk + _END)


class LogIndex:
    """The broker-wide RocksDB. Thread-safe (RocksDB is); batches are per append."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._store = IndexDb(path)
        self.recreated = self._store.recreated  # a corrupt DB was set aside: every log reindexes

    @property
    def failure(self) -> OSError | None:
        """The write that failed (RocksDB takes no more until reopened), or None."""
        return self._store.failure

    def reopen(self) -> None:
        """Make a failed index writable again (index_db.py); raises while it cannot be."""
        self._store.reopen()

    def partition(self, topic_id: str, partition: int) -> PartitionIndex:
        return PartitionIndex(self._store, partition_key(topic_id, partition))

    @staticmethod
    def batch() -> WriteBatch:
        return WriteBatch(raw_mode=True)

    def write(self, batch: WriteBatch) -> None:
        self._store.write(batch)

    def drop_partition(self, topic_id: str, partition: int) -> None:
        batch = self.batch()
        self.partition(topic_id, partition).drop_all(batch)
        self.write(batch)

    def drop_range(self, topic_id: str, partition: int, start: int, end: int | None = None) -> None:
        """Delete a partition's frame/segment entries for offsets in [start, end)."""
        batch = self.batch()
        self.partition(topic_id, partition).drop_frames(batch, start, end)
        self.write(batch)

    def flush(self) -> None:
        self._store.flush()

    def close(self) -> None:
        self._store.close()
