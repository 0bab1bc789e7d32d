"""Idempotent-producer state of one partition (Kafka's ProducerStateManager, docs/design.md §1, §3).

Per producer id: its current epoch, the timestamp of its last batch (for expiry) and its last
`max_batches` (5) appended batches (first/last sequence, base/last offset), so that a retried
in-flight batch is recognised and answered with its ORIGINAL offsets.

Semantics (Kafka 2.5+, KIP-360):
- a batch whose epoch is older than the producer's → INVALID_PRODUCER_EPOCH (a fenced zombie);
- same epoch: a batch equal (first and last sequence) to a cached one is a DUPLICATE; else it
  must continue the last one (`last_seq + 1`, wrapping 2^31-1 → 0) or it is
  OUT_OF_ORDER_SEQUENCE_NUMBER (this includes retries older than the cached 5);
- a newer epoch must start at sequence 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER) and resets the cache;
- a producer with no state is accepted at any sequence: its state may have expired or been lost
  with its data, and refusing would make the client reset and re-send (duplicates). Kafka before
  2.5 answered UNKNOWN_PRODUCER_ID to a non-zero first sequence instead: opt in with
  `reject_unknown_nonzero_sequence=True`. State is kept when retention deletes a producer's
  frames (as KIP-360), and dropped only by `expire`.

State is derived from the frames only: the leader applies what it appended, followers apply
every replicated frame (`apply_frame`), so a new leader already has it. Persistence is Kafka's
snapshot + replay: `checkpoint` stores the whole state (struct-packed) in the index under the
offset it is valid at (producer-key space `2^63 + offset`; keys below 2^63 stay free for
per-producer use). Several checkpoints are kept because truncation needs state as of an EARLIER
offset, which one copy updated in place cannot give. `rebuild` loads the newest checkpoint that
is at or below the log end and still matches the log (leader epoch of its last frame), and
replays frame headers from there; with none it replays from the log start.

Not thread-safe: use it from the partition's event loop, like Partition.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Iterator

from ingest.log.frame_headers import epoch_at, iter_frame_headers
from ingest.log.index import LogIndex
from ingest.log.local_log import LocalLog
from ingest.unified.producer_appends import PendingAppends
from ingest.unified.producer_checks import check_batch
from ingest.unified.producer_types import (
    APPEND,
    MAX_SEQUENCE,
    BatchMetadata,
    ProducerEntry,
    Verdict,
    add_seq,
    next_entry,
)
from logformat.frame import NO_PRODUCER_ID, FrameHeader

log = logging.getLogger(__name__)

DEFAULT_EXPIRATION_MS = 7 * 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms default
_CKPT_BASE = 1 << 63  # checkpoint keys: 2^63 + offset (real producer ids are < 2^63)
_CKPT = struct.Struct("<Bi")  # version, leader epoch of the frame before the offset
_SNAP = struct.Struct("<BqI")  # version, end offset, producer count
_ENTRY = struct.Struct("<qhqB")  # producer id, epoch, last timestamp, batch count
_BATCH = struct.Struct("<iiqq")  # first seq, last seq, base offset, last offset
_VERSION = 1


class ProducerStateManager:
    def __init__(
        self,
        index: LogIndex,
        topic_id: str,
        partition: int,
        *,
        producer_id_expiration_ms: int = DEFAULT_EXPIRATION_MS,
        max_batches: int = 5,
        max_checkpoints: int = 3,
        reject_unknown_nonzero_sequence: bool = False,
    ) -> None:
        if not 1 <= max_batches <= 255 or max_checkpoints < 1:
            raise ValueError("max_batches must be in 1..255 and max_checkpoints at least 1")
        self._index = index
        self._pindex = index.partition(topic_id, partition)
        self.expiration_ms = producer_id_expiration_ms
        self.max_batches = max_batches
        self.max_checkpoints = max_checkpoints
        self.strict_unknown = reject_unknown_nonzero_sequence
        self._entries: dict[int, ProducerEntry] = {}
        self._end = 0  # state covers the frames below this offset
        self._last_checkpoint = -1  # offset of the newest checkpoint, -1 for none

    # --- reading ---
    @property
    def end_offset(self) -> int:
        return self._end

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def producers(self) -> dict[int, ProducerEntry]:
        return dict(self._entries)

    # --- validation ---
    def check(
        self, producer_id: int, producer_epoch: int, base_sequence: int, record_count: int
    ) -> Verdict:
        """Validate a batch against the committed state; pure. Raises TierlogError."""
        e = self._entries.get(producer_id)
        return check_batch(
            e,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
            strict_unknown=self.strict_unknown,
        )

    def begin(self, next_offset: int) -> PendingAppends:
        """An overlay for one group-commit drain that will append from `next_offset`."""
        return PendingAppends(self, next_offset)

    # --- applying appended frames ---
    def update(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        record_count: int,
        base_offset: int,
        last_offset: int,
        timestamp_ms: int | None = None,
    ) -> None:
        """Record an appended batch (no validation: the log is the truth). Idempotent: a batch
        at or below the producer's last offset was applied already and is ignored."""
        self._end = max(self._end, last_offset + 1)
        if producer_id == NO_PRODUCER_ID:
            return
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        last_seq = add_seq(base_sequence, record_count - 1)
        meta = BatchMetadata(base_sequence, last_seq, base_offset, last_offset)
        e = self._entries.get(producer_id)
        self._entries[producer_id] = next_entry(e, producer_epoch, meta, ts, self.max_batches)

    def apply_frame(self, header: FrameHeader) -> None:
        """Follower (and replay) path: apply one frame as written; plain frames only advance
        the end offset."""
        self.update(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.record_count,
            header.base_offset,
            header.last_offset,
            header.max_timestamp,
        )

    def expire(self, now_ms: int) -> list[int]:
        """Drop producers idle (by their last batch's timestamp) for expiration_ms or more."""
        cutoff = now_ms - self.expiration_ms
        gone = [pid for pid, e in self._entries.items() if e.last_timestamp <= cutoff]
        for pid in gone:
            del self._entries[pid]
        return gone

    # --- snapshot format ---
    def snapshot(self) -> bytes:
        parts = [_SNAP.pack(_VERSION, self._end, len(self._entries))]
        for pid, e in self._entries.items():
            parts.append(_ENTRY.pack(pid, e.epoch, e.last_timestamp, len(e.batches)))
            parts.extend(_BATCH.pack(*b) for b in e.batches)
        return b"".join(parts)

    def load(self, data: bytes | memoryview) -> None:
        """Replace the state by a `snapshot()`; ValueError if it is not one."""
        try:
            version, end, n = _SNAP.unpack_from(data, 0)
            if version != _VERSION:
                raise ValueError(f"unknown producer snapshot version {version}")
            pos, entries = _SNAP.size, {}
            for _ in range(n):
                pid, epoch, ts, nb = _ENTRY.unpack_from(data, pos)
                pos += _ENTRY.size
                batches = tuple(
                    BatchMetadata(*_BATCH.unpack_from(data, pos + i * _BATCH.size))
                    for i in range(nb)
                )
                pos += nb * _BATCH.size
                entries[pid] = ProducerEntry(epoch, batches, ts)
        except struct.error as exc:
            raise ValueError(f"truncated producer snapshot: {exc}") from exc
        if pos != len(data):
            raise ValueError("trailing bytes after the producer snapshot")
        self._entries, self._end = entries, end

    # --- persistence and rebuild ---
    def checkpoint(self, plog: LocalLog) -> None:
        """Store the state at its end offset; keep the newest `max_checkpoints`. Call it when
        the active segment rolls (see maybe_checkpoint) and at close."""
        batch, end = self._index.batch(), self._end
        value = _CKPT.pack(_VERSION, epoch_at(plog.leader_epochs(), end - 1))
        self._pindex.put_producer(batch, _CKPT_BASE + end, value + self.snapshot())
        offsets = self._checkpoint_offsets()
        older = [o for o in offsets if o < end]
        doomed = older[: max(0, len(older) - self.max_checkpoints + 1)]
        for off in doomed + [o for o in offsets if o > end]:  # above end: stale, invalid
            self._pindex.delete_producer(batch, _CKPT_BASE + off)
        self._index.write(batch)
        self._last_checkpoint = end

    def maybe_checkpoint(self, plog: LocalLog) -> bool:
        """Checkpoint if the log rolled since the newest checkpoint (cheap to call often)."""
        if self._last_checkpoint >= plog.active_segment.base_offset:
            return False
        self.checkpoint(plog)
        return True

    def rebuild(self, plog: LocalLog) -> int:
        """Load the newest checkpoint still valid for the log, replay the frames after it (from
        the log start without one) and delete invalid checkpoints. Returns frames replayed.
        Call after LocalLog.open and before any append; then expire(now)."""
        leo, lso, epochs = plog.log_end_offset, plog.log_start_offset, plog.leader_epochs()
        batch, loaded = self._index.batch(), False
        for key, value in reversed(list(self._checkpoints())):
            off = key - _CKPT_BASE
            ok = off <= leo and len(value) >= _CKPT.size
            if ok:
                version, epoch = _CKPT.unpack_from(value)
                ok = version == _VERSION and (off <= lso or epoch_at(epochs, off - 1) == epoch)
            if ok and not loaded:
                try:
                    self.load(memoryview(value)[_CKPT.size :])
                    loaded, self._last_checkpoint = True, off
                    continue
                except ValueError as exc:
                    log.warning("unreadable producer checkpoint at %d: %s", off, exc)
            if not ok or not loaded:
                self._pindex.delete_producer(batch, key)
        if not loaded:
            self._entries, self._end, self._last_checkpoint = {}, lso, -1
        self._index.write(batch)
        return self.replay(plog, max(self._end, lso), leo)

    def replay(self, plog: LocalLog, from_offset: int, end_offset: int | None = None) -> int:
        """Apply the headers of the frames holding offsets in [from_offset, end_offset)."""
        n = 0
        for header in iter_frame_headers(plog, from_offset, end_offset):
            self.apply_frame(header)
            n += 1
        self._end = max(self._end, plog.log_end_offset if end_offset is None else end_offset)
        return n

    def on_truncate(self, plog: LocalLog) -> int:
        """After LocalLog.truncate_to: drop the state of truncated frames (rebuild from the
        newest checkpoint at or below the new end). Returns frames replayed."""
        if self._end <= plog.log_end_offset:
            return 0
        return self.rebuild(plog)

    def reset(self, plog: LocalLog) -> None:
        """After LocalLog.truncate_fully_and_start_at: no state, no checkpoints."""
        batch = self._index.batch()
        for key, _ in list(self._checkpoints()):
            self._pindex.delete_producer(batch, key)
        self._index.write(batch)
        self._entries, self._end = {}, plog.log_end_offset
        self._last_checkpoint = -1

    def _checkpoints(self) -> Iterator[tuple[int, bytes]]:
        return ((k, v) for k, v in self._pindex.producers() if k >= _CKPT_BASE)

    def _checkpoint_offsets(self) -> list[int]:
        return [k - _CKPT_BASE for k, _ in self._checkpoints()]


__all__ = [
    "APPEND",
    "MAX_SEQUENCE",
    "BatchMetadata",
    "PendingAppends",
    "ProducerEntry",
    "ProducerStateManager",
    "Verdict",
    "add_seq",
    "iter_frame_headers",
]
