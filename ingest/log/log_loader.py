"""Crash recovery of one partition's hot log at open (Kafka's LogLoader, docs/design.md §3).

One job: bring a partition directory and its RocksDB index entries back to a consistent state
before the log serves anything. `prepare_dir` wipes a directory left by another incarnation of
the topic; `LogLoader` (through `recover`) runs the passes: finish interrupted cleaner swaps,
load the segments (cutting torn or corrupt tails by CRC, reindexing what the index does not
cover, or rebuilding the whole index), delete files after an offset break, check the index
against the kept segments, rebuild the time index, roll past a sealed tail, and record the
state. It does not know LocalLog: the caller passes the directory and the index, and
installs the result.
"""

from __future__ import annotations

import logging
import os
from typing import NamedTuple

from rocksdict import WriteBatch

from ingest.log import segment_swap
from ingest.log.index import FrameEntry, LogIndex, PartitionCheckpoint, PartitionIndex, SegmentMeta
from ingest.log.log_types import PartitionDir
from ingest.log.segment import (
    NO_TIMESTAMP,
    Segment,
    list_segments,
    read_partition_file,
    remove_dir,
    write_partition_file,
)

log = logging.getLogger(__name__)


class RecoveryResult(NamedTuple):
    """The recovered log (segments, offsets, time and epoch caches) and what recovery did."""

    segments: list[Segment]
    log_start_offset: int
    log_end_offset: int
    recovery_checkpoint: int
    max_timestamp: int | None  # the time index's last key; None if it is empty
    latest_epoch: int
    clean_shutdown: bool
    full_rebuild: bool
    truncated_bytes: int
    frames_reindexed: int
    entries_removed: int
    segments_deleted: int

    @property
    def repaired(self) -> bool:
        return bool(
            self.truncated_bytes
            or self.frames_reindexed
            or self.entries_removed
            or self.segments_deleted
        )

    def log_to(self, logger: logging.Logger, topic: str, partition: int) -> None:
        """Log what recovery did (a warning if it repaired anything) on the log's logger.
        A new, empty log had nothing to recover: it is not reported as an unclean rebuild."""
        where = {"topic": topic, "partition": partition}
        if self.full_rebuild and self.log_end_offset == 0 and not self.repaired:
            logger.info("log created", extra=where)
            return
        logger.log(
            logging.WARNING if self.repaired else logging.INFO,
            "log repaired on recovery" if self.repaired else "log recovered",
            extra={
                **where,
                "segments": len(self.segments),
                "log_start_offset": self.log_start_offset,
                "log_end_offset": self.log_end_offset,
                "clean_shutdown": self.clean_shutdown,
                "index_rebuilt": self.full_rebuild,
                "truncated_bytes": self.truncated_bytes,
                "frames_reindexed": self.frames_reindexed,
                "entries_removed": self.entries_removed,
                "segments_deleted": self.segments_deleted,
            },
        )


def prepare_dir(where: PartitionDir, index: LogIndex) -> None:
    """Wipe a directory left by another incarnation of the topic; write partition.json."""
    directory, topic, topic_id, partition = where
    if os.path.isdir(directory):
        meta = read_partition_file(directory)
        if meta is not None and meta.get("topic_id") == topic_id:
            return
        old = meta.get("topic_id") if meta else None
        log.warning(
            "wiping a stale partition dir",
            extra={"dir": directory, "old_topic_id": old, "topic_id": topic_id},
        )
        if isinstance(old, str):
            index.drop_partition(old, partition)
        remove_dir(directory)
    os.makedirs(directory)
    # A fresh directory must not inherit index entries (e.g. a directory removed by hand).
    index.drop_partition(topic_id, partition)
    write_partition_file(directory, {"topic": topic, "topic_id": topic_id, "partition": partition})


def recover(directory: str, index: LogIndex, idx: PartitionIndex) -> RecoveryResult:
    """Rebuild the log from the segment files in `directory`, repairing file and index.

    `idx` is the partition's view of `index` (which makes and writes the batches)."""
    return LogLoader(directory, index, idx).load()


class LogLoader:
    """One recovery of one partition directory, in named passes (Kafka's LogLoader).

    Sealed segments (fsynced at seal) are trusted; if the index does not cover one exactly
    it is reindexed from the file without CRC checks. Segments at/after the recovery
    checkpoint of a log that was not closed cleanly are rescanned with CRC checks: the
    file is cut at the first torn or corrupt frame, missing index entries are added and
    entries pointing past the cut are deleted. A missing index (no partition state) means
    a full rebuild. Offsets must continue across files; anything after a break is deleted.
    A log cleaner swap a crash interrupted is first finished or dropped (segment_swap); the
    swapped segment's stale index entries then fail the consistency check and are redone.
    """

    def __init__(self, directory: str, index: LogIndex, idx: PartitionIndex) -> None:
        self.dir, self.index, self.idx = directory, index, idx
        self.files: list[tuple[int, str]] = []
        self.state = PartitionCheckpoint(0, 0, False)
        self.full_rebuild = False
        self.metas: dict[int, SegmentMeta] = {}
        self.segments: list[Segment] = []
        self.first_reindexed: int | None = None  # the time index is rebuilt from here
        self.epoch = -1  # a full rebuild also recovers the leader-epoch cache from headers
        self.truncated_bytes = self.frames_reindexed = self.entries_removed = 0
        self.segments_deleted = 0
        self.log_start = self.log_end = 0
        self.max_timestamp: int | None = None

    def load(self) -> RecoveryResult:
        """Run every pass in order; the index batches are written as each pass ends."""
        self.complete_swaps()
        self.read_state()
        self.load_segments()
        self.delete_after_break()
        self.check_index()
        batch = self.index.batch()
        self.rebuild_time_index(batch)
        self.open_active_segment()
        self.write_state(batch)
        return self.result()

    def complete_swaps(self) -> None:
        """Drop unfinished cleaned files; roll committed cleaner swaps forward."""
        segment_swap.finish(self.dir)

    def read_state(self) -> None:
        """List the segment files and read the partition state (none: rebuild everything)."""
        self.files = list_segments(self.dir)
        state = self.idx.get_state()
        self.full_rebuild = state is None
        if state is None:
            state = PartitionCheckpoint(self.files[0][0] if self.files else 0, 0, False)
        self.state = state
        self.metas = self.idx.segment_metas()

    def load_segments(self) -> None:
        """Open the files in offset order up to the first offset break; rescan or trust each."""
        state = self.state
        rescan_from = max((b for b, _ in self.files if b <= state.recovery_checkpoint), default=0)
        for i, (base, path) in enumerate(self.files):
            segs = self.segments
            if segs and base != segs[-1].next_offset:
                log.error(
                    "offset break, deleting later segments",
                    extra={"dir": self.dir, "expected": segs[-1].next_offset, "found": base},
                )
                return
            seg = Segment.open(path, base)
            nxt = self.files[i + 1][0] if i + 1 < len(self.files) else None
            unflushed = base >= rescan_from
            meta = self.metas.get(base)
            segs.append(seg)
            if (
                self.full_rebuild
                or (unflushed and not state.clean_shutdown)
                or meta is None
                or not self.idx.segment_consistent(base, nxt, seg.size)
            ):
                self.recover_segment(seg, nxt, meta, verify=self.full_rebuild or unflushed)
            else:
                self.trust_segment(seg, nxt, meta)

    def recover_segment(
        self, seg: Segment, nxt: int | None, meta: SegmentMeta | None, *, verify: bool
    ) -> None:
        """Rescan a segment (by CRC when `verify`), cut its torn tail, reindex its frames."""
        base = seg.base_offset
        frames, torn = seg.recover(verify=verify)
        entries = [
            FrameEntry(h.base_offset, base, p, h.size, h.record_count, h.max_timestamp)
            for p, h in frames
        ]
        batch = self.index.batch()
        # After a cut this is the last segment we keep: its range runs to the end.
        added, removed = self.idx.reindex(batch, base, None if torn else nxt, entries)
        for _, h in frames if self.full_rebuild else ():
            if h.leader_epoch > self.epoch:
                self.idx.put_epoch(batch, h.leader_epoch, h.base_offset)
                self.epoch = h.leader_epoch
        self.truncated_bytes += torn
        self.frames_reindexed += added
        self.entries_removed += removed
        self.index.write(batch)
        if self.first_reindexed is None:
            self.first_reindexed = base
        if meta and meta.created_ms >= 0:
            seg.created_ms = meta.created_ms
        else:
            seg.created_ms = seg.mtime_ms() if entries else NO_TIMESTAMP
        seg.sealed = bool(meta and meta.sealed)

    def trust_segment(self, seg: Segment, nxt: int | None, meta: SegmentMeta) -> None:
        """A segment the index covers exactly: its end and metadata come from the index."""
        last = self.idx.last_frame(nxt)
        seg.next_offset = last.next_offset if seg.size and last else seg.base_offset
        seg.created_ms, seg.max_timestamp, seg.sealed = meta

    def delete_after_break(self) -> None:
        """Unlink the files after an offset break (their offsets cannot be trusted)."""
        kept = len(self.segments)
        self.segments_deleted = len(self.files) - kept
        for _, path in self.files[kept:]:
            os.unlink(path)

    def check_index(self) -> None:
        """Make the index agree with the kept segments: no entries before the first or past
        the end, every segment's metadata, epochs within [log start, log end]."""
        idx, batch = self.idx, self.index.batch()
        if not self.segments:
            self._start_empty(batch)
        segs = self.segments
        first, leo = segs[0].base_offset, segs[-1].next_offset
        if first and idx.frame_floor(first - 1):
            idx.drop_frames(batch, 0, first)  # left by a crash during segment deletion
        if (last := idx.last_frame()) and last.base_offset >= leo:
            idx.drop_frames(batch, leo)  # entries past the end
        for seg in segs[:-1]:
            if not seg.sealed:  # a roll that crashed before recording the seal
                seg.seal()
        for seg in segs:
            idx.put_segment(
                batch, seg.base_offset, SegmentMeta(seg.created_ms, seg.max_timestamp, seg.sealed)
            )
        for gone in set(self.metas) - {seg.base_offset for seg in segs}:
            idx.delete_segment(batch, gone)  # e.g. segments a cleaner swap merged away
        self.log_start = min(max(self.state.log_start_offset, first), leo)
        self.log_end = leo
        idx.truncate_epochs_from_end(batch, leo)
        idx.truncate_epochs_from_start(batch, self.log_start)
        self.index.write(batch)

    def _start_empty(self, batch: WriteBatch) -> None:
        """No segment file left: one empty segment where the log ended, no frame entries."""
        last = self.idx.last_frame()
        start = max(self.state.log_start_offset, last.next_offset if last else 0)
        self.idx.drop_frames(batch, 0)
        self.idx.truncate_time(batch, 0)
        self.segments = [Segment.create(self.dir, start)]

    def rebuild_time_index(self, batch: WriteBatch) -> None:
        """Rebuild the time index from the first reindexed segment; else read its last key."""
        idx = self.idx
        if self.first_reindexed is not None:
            frames = list(idx.frames(self.first_reindexed))
            self.max_timestamp = idx.rebuild_time(batch, self.first_reindexed, frames)
        else:
            self.max_timestamp = last_time[0] if (last_time := idx.last_time()) else None

    def open_active_segment(self) -> None:
        """Never append to a sealed segment (it may be tiered already): roll past it."""
        tail = self.segments[-1]
        if not tail.sealed:
            return
        if tail.size:
            tail.seal()  # as a roll: fsync before the new file exists
            self.segments.append(Segment.create(self.dir, self.log_end))
        else:
            tail.sealed = False

    def write_state(self, batch: WriteBatch) -> None:
        """Record the log start and a recovery checkpoint at the active segment (not clean)."""
        checkpoint = self.segments[-1].base_offset
        self.idx.put_state(batch, PartitionCheckpoint(self.log_start, checkpoint, False))
        self.index.write(batch)

    def result(self) -> RecoveryResult:
        return RecoveryResult(
            self.segments,
            self.log_start,
            self.log_end,
            self.segments[-1].base_offset,
            self.max_timestamp,
            max((e for e, _ in self.idx.epochs()), default=-1),
            self.state.clean_shutdown,
            self.full_rebuild,
            self.truncated_bytes,
            self.frames_reindexed,
            self.entries_removed,
            self.segments_deleted,
        )
