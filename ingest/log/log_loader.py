"""Crash recovery of one partition's hot log at open (Kafka's LogLoader, DESIGN §3).

One job: bring a partition directory and its RocksDB index entries back to a consistent state
before the log serves anything. `prepare_dir` wipes a directory left by another incarnation of
the topic; `recover` cuts torn or corrupt tails (by CRC), reindexes segments the index does not
cover, removes stale entries, or rebuilds the whole index from the segment files, and returns
what the log needs to start from. It does not know PartitionLog: the caller passes the
directory and the index, and installs the result.
"""

from __future__ import annotations

import logging
import os
from typing import NamedTuple

from ingest.log import segment_swap
from ingest.log.index import FrameEntry, LogIndex, PartitionIndex, PartitionState, SegmentMeta
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
        """Log what recovery did (a warning if it repaired anything) on the log's logger."""
        logger.log(
            logging.WARNING if self.repaired else logging.INFO,
            "log recovered topic=%s partition=%d segments=%d log_start=%d log_end=%d "
            "clean=%s full_rebuild=%s truncated_bytes=%d frames_reindexed=%d "
            "entries_removed=%d segments_deleted=%d",
            topic,
            partition,
            len(self.segments),
            self.log_start_offset,
            self.log_end_offset,
            self.clean_shutdown,
            self.full_rebuild,
            self.truncated_bytes,
            self.frames_reindexed,
            self.entries_removed,
            self.segments_deleted,
        )


def prepare_dir(directory: str, topic: str, topic_id: str, partition: int, index: LogIndex) -> None:
    """Wipe a directory left by another incarnation of the topic; write partition.json."""
    if os.path.isdir(directory):
        meta = read_partition_file(directory)
        if meta is not None and meta.get("topic_id") == topic_id:
            return
        old = meta.get("topic_id") if meta else None
        log.warning(
            "wiping stale partition dir=%s old_topic_id=%s new_topic_id=%s",
            directory,
            old,
            topic_id,
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

    `idx` is the partition's view of `index` (which makes and writes the batches).

    Sealed segments (fsynced at seal) are trusted; if the index does not cover one exactly
    it is reindexed from the file without CRC checks. Segments at/after the recovery
    checkpoint of a log that was not closed cleanly are rescanned with CRC checks: the
    file is cut at the first torn or corrupt frame, missing index entries are added and
    entries pointing past the cut are deleted. A missing index (no partition state) means
    a full rebuild. Offsets must continue across files; anything after a break is deleted.
    A log cleaner swap a crash interrupted is first finished or dropped (segment_swap); the
    swapped segment's stale index entries then fail the consistency check and are redone.
    """
    segment_swap.finish(directory)
    files = list_segments(directory)
    state = idx.get_state()
    full = state is None
    if state is None:
        state = PartitionState(files[0][0] if files else 0, 0, False)
    metas = idx.segment_metas()
    rescan_from = max((b for b, _ in files if b <= state.recovery_checkpoint), default=0)
    segs: list[Segment] = []
    touched: int | None = None
    cut = added = removed = 0
    epoch = -1  # a full rebuild also recovers the leader-epoch cache from frame headers
    for i, (base, path) in enumerate(files):
        if segs and base != segs[-1].next_offset:
            log.error(
                "offset break, deleting later segments dir=%s expected=%d found=%d",
                directory,
                segs[-1].next_offset,
                base,
            )
            break
        seg = Segment.open(path, base)
        nxt = files[i + 1][0] if i + 1 < len(files) else None
        unflushed = base >= rescan_from
        meta = metas.get(base)
        segs.append(seg)
        if (
            full
            or (unflushed and not state.clean_shutdown)
            or meta is None
            or not idx.segment_consistent(base, nxt, seg.size)
        ):
            frames, torn = seg.recover(verify=full or unflushed)
            entries = [
                FrameEntry(h.base_offset, base, p, h.size, h.record_count, h.max_timestamp)
                for p, h in frames
            ]
            batch = index.batch()
            # After a cut this is the last segment we keep: its range runs to the end.
            a, r = idx.reindex(batch, base, None if torn else nxt, entries)
            for _, h in frames if full else ():
                if h.leader_epoch > epoch:
                    idx.put_epoch(batch, h.leader_epoch, h.base_offset)
                    epoch = h.leader_epoch
            cut, added, removed = cut + torn, added + a, removed + r
            index.write(batch)
            touched = base if touched is None else touched
            seg.created_ms = (
                meta.created_ms
                if meta and meta.created_ms >= 0
                else seg.mtime_ms()
                if entries
                else NO_TIMESTAMP
            )
            seg.sealed = bool(meta and meta.sealed)
        else:
            last = idx.last_frame(nxt)
            seg.next_offset = last.next_offset if seg.size and last else base
            seg.created_ms, seg.max_timestamp, seg.sealed = meta
    deleted = len(files) - len(segs)
    for _, path in files[len(segs) :]:
        os.unlink(path)
    batch = index.batch()
    if not segs:
        last = idx.last_frame()
        start = max(state.log_start_offset, last.next_offset if last else 0)
        idx.drop_frames(batch, 0)
        idx.truncate_time(batch, 0)
        segs = [Segment.create(directory, start)]
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
    for gone in set(metas) - {seg.base_offset for seg in segs}:
        idx.delete_segment(batch, gone)  # e.g. segments a cleaner swap merged away
    lso = min(max(state.log_start_offset, first), leo)
    idx.truncate_epochs_from_end(batch, leo)
    idx.truncate_epochs_from_start(batch, lso)
    index.write(batch)
    batch = index.batch()
    if touched is not None:
        max_ts = idx.rebuild_time(batch, touched, list(idx.frames(touched)))
    else:
        max_ts = last_time[0] if (last_time := idx.last_time()) else None
    latest_epoch = max((e for e, _ in idx.epochs()), default=-1)
    tail = segs[-1]
    if tail.sealed:
        if tail.size:  # sealed may already be tiered: never append to it again
            tail.seal()  # as a roll: fsync before the new file exists
            segs.append(Segment.create(directory, leo))
        else:
            tail.sealed = False
    checkpoint = segs[-1].base_offset
    idx.put_state(batch, PartitionState(lso, checkpoint, False))
    index.write(batch)
    return RecoveryResult(
        segs,
        lso,
        leo,
        checkpoint,
        max_ts,
        latest_epoch,
        state.clean_shutdown,
        full,
        cut,
        added,
        removed,
        deleted,
    )
