"""The broker's log cleaner: key compaction of a partition's sealed hot segments (Kafka's
LogCleaner) for `cleanup.policy=compact` (and `compact,delete`).

Every replica cleans its own disk independently (followers copy frames by offset and never
depend on the leader's segment layout). One pass over one partition:
1. plan (offset_map.plan): the cleanable sealed prefix below the high watermark, the
   tiered end (remote-storage topics: only bytes the cold tier already holds, so tiering
   always copies segments exactly as registered) and min.compaction.lag.ms; run only if the
   dirty share reaches min.cleanable.dirty.ratio (or max.compaction.lag.ms forces it);
2. key → latest offset over the dirty section (OffsetMap);
3. per group of consecutive segments (≤ segment.bytes of input): recopy the surviving rows
   into a `.cleaned` file (cleaner_frames.reframe: offsets and frame spans preserved, each
   recent producer's last batch kept), fsync, swap it in (LocalLog.swap_cleaned,
   crash-safe through segment_swap);
4. persist the cleaner checkpoint (cleaned-up-to offset) in the partition directory, so a
   restart resumes; a stale or lost checkpoint only costs work, never correctness (a record
   is removed only when a later record of its key exists).
Runs in a worker thread; it holds the log's lock only for the swap itself.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple, Protocol

import pyarrow as pa

from cluster.metadata_cache import MetadataCache
from ingest import metrics
from ingest.cleaner.cleaner_frames import OutFrame, SourceFrame, reframe
from ingest.cleaner.offset_map import MAX_GROUP_SPAN, CleanBounds, CleanPlan, OffsetMap, plan
from ingest.log import segment_swap
from ingest.log.local_log import LocalLog, SegmentInfo
from ingest.log.log_read import CorruptLogError
from ingest.log.segment import fsync_dir
from ingest.replication import corruption
from ingest.replication.partition import Partition
from ingest.unified.producer_state import DEFAULT_EXPIRATION_MS
from logformat.frame import (
    HEADER,
    HEADER_SIZE,
    MAGIC,
    NO_PRODUCER_ID,
    CorruptFrameError,
    FrameHeader,
    decode_records,
    verify_crc,
)
from metadata.configs import TopicConfig
from metadata.types import TopicIdPartition, TopicNamePartition

log = logging.getLogger("tierlog.log_cleaner")

CHECKPOINT_FILE = "cleaner-offset-checkpoint"


class CleanResult(NamedTuple):
    segments_in: int
    segments_out: int
    bytes_in: int
    bytes_out: int
    records_in: int
    records_out: int
    dirty_ratio: float
    cleaned_to: int


def read_checkpoint(directory: str) -> int:
    try:
        with open(os.path.join(directory, CHECKPOINT_FILE)) as f:
            value = json.load(f).get("cleaned_to", 0)
    except (OSError, ValueError, AttributeError):
        return 0
    return value if isinstance(value, int) else 0


def write_checkpoint(directory: str, offset: int) -> None:
    path = os.path.join(directory, CHECKPOINT_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump({"cleaned_to": offset}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    fsync_dir(directory)


def segment_frames(path: str) -> Iterator[tuple[FrameHeader, bytes]]:
    """(header, frame bytes) of a sealed segment file, read through our own descriptor:
    retention may unlink the file meanwhile and our descriptor stays valid."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size, pos = os.fstat(fd).st_size, 0
        while pos < size:
            raw = os.pread(fd, HEADER_SIZE, pos)
            header = FrameHeader._make(HEADER.unpack(raw)) if len(raw) == HEADER_SIZE else None
            if header is None or header.magic != MAGIC:
                raise CorruptFrameError(f"{path}: no frame header at byte {pos}")
            frame = os.pread(fd, header.size, pos)
            if len(frame) != header.size:
                raise CorruptFrameError(f"{path}: frame at byte {pos} is cut short")
            # Rewriting a frame gives it a new, valid CRC: a corrupt one must stop the pass,
            # or cleaning would launder rotten bytes into frames every check accepts.
            try:
                verify_crc(frame, 0, header)
            except CorruptFrameError:
                raise CorruptFrameError(
                    f"CRC-32C mismatch at byte {pos} of segment {header.base_offset}",
                    offset=header.base_offset,
                ) from None
            yield header, frame
            pos += header.size
    finally:
        os.close(fd)


class LogCleaner:
    def __init__(
        self, *, map_capacity: int = 1_000_000, producer_expiration_ms: int = DEFAULT_EXPIRATION_MS
    ) -> None:
        self.map_capacity = map_capacity
        self.producer_expiration_ms = producer_expiration_ms

    def plan_for(
        self,
        plog: LocalLog,
        cfg: TopicConfig,
        high_watermark: int,
        tiered_end: int | None,
        now_ms: int,
    ) -> CleanPlan | None:
        bounds = CleanBounds(high_watermark, tiered_end, now_ms, cfg.min_compaction_lag_ms)
        checkpoint = min(read_checkpoint(plog.dir), plog.log_end_offset)
        return plan(plog.segments(), checkpoint, bounds, cfg.remote_storage_enable)

    def clean(
        self,
        plog: LocalLog,
        cfg: TopicConfig,
        high_watermark: int,
        tiered_end: int | None = None,
        now_ms: int | None = None,
        *,
        force: bool = False,
    ) -> CleanResult | None:
        """One pass over one partition; None when there was nothing (or not enough) to do."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        p = self.plan_for(plog, cfg, high_watermark, tiered_end, now)
        labels = (plog.topic, str(plog.partition))
        metrics.CLEANER_DIRTY_RATIO.labels(*labels).set(p.dirty_ratio if p else 0.0)
        if p is None:
            return None
        dirty = [s for s in p.segments if s.next_offset > p.dirty_start]
        overdue = min((s.created_ms for s in dirty), default=now) <= now - cfg.max_compaction_lag_ms
        if not force and p.dirty_ratio < cfg.min_cleanable_dirty_ratio and not overdue:
            return None
        started = time.monotonic()
        try:
            offsets, segs, last_batches = self._scan(p, now)
        except FileNotFoundError:
            return None  # retention removed a segment meanwhile: next pass
        horizon = now - cfg.delete_retention_ms
        totals = [0, 0, 0, 0, 0, 0]  # segments in/out, bytes in/out, records in/out
        keep = set(last_batches.values())
        limit = max(cfg.segment_bytes, 1)
        group: list[SegmentInfo] = []
        outs: list[OutFrame] = []
        for seg in segs:
            frames, records_in = self._recopy(seg, offsets, keep, horizon)
            totals[0], totals[2], totals[4] = (
                totals[0] + 1,
                totals[2] + seg.size,
                totals[4] + records_in,
            )
            size = sum(len(f.data) for f in frames)
            # Group by OUTPUT size (what the cleaned segment will weigh), so outputs of
            # heavily compacted segments merge in the same pass instead of staying tiny.
            if group and (
                sum(len(f.data) for f in outs) + size > limit
                or seg.next_offset - group[0].base_offset > MAX_GROUP_SPAN
            ):
                if not self._swap(plog, group, outs, totals):
                    return self._changed(plog)
                group, outs = [], []
            group.append(seg)
            outs.extend(frames)
        if group and not self._swap(plog, group, outs, totals):
            return self._changed(plog)
        cleaned_to = segs[-1].next_offset
        write_checkpoint(plog.dir, cleaned_to)
        si, so, bi, bo, ri, ro = totals
        result = CleanResult(si, so, bi, bo, ri, ro, p.dirty_ratio, cleaned_to)
        self._report(plog, result, len(offsets), time.monotonic() - started)
        return result

    def _scan(
        self, p: CleanPlan, now_ms: int
    ) -> tuple[OffsetMap, list[SegmentInfo], dict[int, int]]:
        """Pass 1: the offset map over the dirty section (stopping at a segment boundary once
        full) and each recent producer's last batch (base offset) in what will be rewritten."""
        offsets = OffsetMap(self.map_capacity)
        last_batch: dict[int, tuple[int, int]] = {}  # producer id -> (base offset, max ts)
        segs: list[SegmentInfo] = []
        for seg in p.segments:
            if offsets.full and seg.base_offset >= p.dirty_start:
                break  # the next pass goes on from here
            for header, frame in segment_frames(seg.path):
                if header.producer_id != NO_PRODUCER_ID:
                    last_batch[header.producer_id] = (header.base_offset, header.max_timestamp)
                if header.next_offset > p.dirty_start:
                    offsets.add(decode_records(frame, verify=False), header.base_offset)
            segs.append(seg)
        expiry = now_ms - self.producer_expiration_ms
        keep = {pid: base for pid, (base, ts) in last_batch.items() if ts > expiry}
        return offsets, segs, keep

    @staticmethod
    def _recopy(
        seg: SegmentInfo, offsets: OffsetMap, keep: set[int], horizon: int
    ) -> tuple[list[OutFrame], int]:
        """Pass 2 for one segment: its output frames (spans tiling the segment) and the number
        of records it held."""
        sources: list[SourceFrame] = []
        records_in = 0
        for header, frame in segment_frames(seg.path):
            batch = decode_records(frame, verify=False)
            records_in += batch.num_rows
            mask = offsets.keep_mask(batch, header.base_offset, horizon)
            rows = batch if all(mask) else batch.filter(pa.array(mask, pa.bool_()))
            last = header.producer_id != NO_PRODUCER_ID and header.base_offset in keep
            sources.append(SourceFrame(header, rows, last))
        return list(reframe(sources)), records_in

    @staticmethod
    def _swap(
        plog: LocalLog, group: list[SegmentInfo], outs: list[OutFrame], totals: list[int]
    ) -> bool:
        """Write the group's cleaned file and swap it in. False if the log changed."""
        bytes_in = sum(s.size for s in group)
        bytes_out = sum(len(f.data) for f in outs)
        records_out = sum(f.rows for f in outs)
        if len(group) == 1 and bytes_out >= bytes_in:
            bytes_out, records_out = bytes_in, -1  # nothing to reclaim: keep the file as is
        else:
            entries, pos = [], 0
            for f in outs:
                entries.append((f.base_offset, pos, len(f.data), f.record_count, f.max_timestamp))
                pos += len(f.data)
            base = group[0].base_offset
            path, _ = segment_swap.write_cleaned(plog.dir, base, (f.data for f in outs))
            if not plog.swap_cleaned(group, path, entries):
                return False
        totals[1] += 1
        totals[3] += bytes_out
        totals[5] += records_out if records_out >= 0 else sum(f.rows for f in outs)
        return True

    @staticmethod
    def _changed(plog: LocalLog) -> None:
        log.info(
            "log cleaner pass stopped: the log changed meanwhile",
            extra={"topic": plog.topic, "partition": plog.partition},
        )

    @staticmethod
    def _report(plog: LocalLog, r: CleanResult, keys: int, seconds: float) -> None:
        metrics.CLEANER_PASSES.labels(plog.topic).inc()
        metrics.CLEANER_SEGMENTS.labels(plog.topic).inc(r.segments_in)
        metrics.CLEANER_BYTES_READ.labels(plog.topic).inc(r.bytes_in)
        metrics.CLEANER_BYTES_RECLAIMED.labels(plog.topic).inc(max(0, r.bytes_in - r.bytes_out))
        metrics.CLEANER_RECORDS_REMOVED.labels(plog.topic).inc(r.records_in - r.records_out)
        log.info(
            "log cleaner pass",
            extra={
                "topic": plog.topic,
                "partition": plog.partition,
                "segments_in": r.segments_in,
                "segments_out": r.segments_out,
                "bytes_in": r.bytes_in,
                "bytes_out": r.bytes_out,
                "records_in": r.records_in,
                "records_out": r.records_out,
                "keys": keys,
                "dirty_ratio": round(r.dirty_ratio, 3),
                "cleaned_to": r.cleaned_to,
                "seconds": round(seconds, 3),
            },
        )


class TieredEndApi(Protocol):
    def tiered_end_offset(self, tp: TopicIdPartition) -> int | None: ...


class CleanerDuty:
    """The broker's periodic duty: one pass over every hosted compacted partition."""

    def __init__(
        self,
        partitions: Callable[[], Mapping[TopicNamePartition, Partition]],
        cache: MetadataCache,
        manifest: TieredEndApi,
        cleaner: LogCleaner | None = None,
    ) -> None:
        self._partitions, self._cache, self._manifest = partitions, cache, manifest
        self.cleaner = cleaner or LogCleaner()

    def run_once(self) -> int:
        """Blocking (run it in a thread). Returns the number of partitions cleaned."""
        cleaned = 0
        for state in list(self._partitions().values()):
            view = self._cache.topic(state.topic)
            if view is None or view.info.id != state.topic_id or not view.config.compact:
                continue
            try:
                end = (
                    self._manifest.tiered_end_offset(state.tp)
                    if view.config.remote_storage_enable
                    else None
                )
                if self.cleaner.clean(state.log, view.config, state.high_watermark, end):
                    cleaned += 1
            except CorruptFrameError as exc:  # a follower refetches it; a leader says so
                bad = exc.offset if exc.offset is not None else state.log.log_start_offset
                corruption.report(state, CorruptLogError(bad, str(exc)))
            except Exception:  # one partition's trouble must not stop the others
                log.exception(
                    "log cleaner pass failed",
                    extra={"topic": state.topic, "partition": state.partition},
                )
        return cleaned
