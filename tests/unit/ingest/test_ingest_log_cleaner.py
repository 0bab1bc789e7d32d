"""The broker's log cleaner: offset map, planning, re-framing, crash-safe swap, recovery."""

from __future__ import annotations

import os
import shutil
import threading

import pyarrow as pa
import pytest

from coldstore.parquet_writer import iter_consumer_batches
from ingest.cleaner.log_cleaner import LogCleaner, read_checkpoint
from ingest.cleaner.offset_map import CleanBounds, OffsetMap, plan
from ingest.log import segment_swap
from ingest.log.local_log import LocalLog, LogConfig, SegmentInfo
from ingest.unified.producer_state import ProducerStateManager
from logformat.frame import decode_records, encode_frame
from logformat.render import to_consumer_batch
from logformat.schema import HEADERS, RECORD_SCHEMA, TIMESTAMP
from metadata.configs import topic_config
from tests.unit.ingest.conftest import LogEnv

NOW = 10_000_000
LOCAL = {"cleanup.policy": "compact", "remote.storage.enable": "false"}
COMPACT = topic_config({**LOCAL, "segment.bytes": 4096})


def keyed(rows: list[tuple[bytes | None, bytes | None]], ts: int = 1_000) -> bytearray:
    n = len(rows)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(range(n), pa.int32()),
            pa.array([ts] * n, TIMESTAMP),
            pa.array([k for k, _ in rows], pa.binary()),
            pa.array([v for _, v in rows], pa.binary()),
            pa.array([None] * n, HEADERS),
        ],
        schema=RECORD_SCHEMA,
    )
    return encode_frame(batch)


def records(log: LocalLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from the log start, as a consumer reads them (gaps skipped)."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        frames = log.read(offset, 1 << 20)
        assert frames
        for header, data in frames:
            b = to_consumer_batch(decode_records(data), header.base_offset)
            for o, k, v in zip(
                b.column(0).to_pylist(),
                b.column(2).to_pylist(),
                b.column(3).to_pylist(),
                strict=True,
            ):
                if o >= offset:
                    out.append((o, k, v))
            offset = header.next_offset
    return out


def model(
    recs: list[tuple[int, bytes | None, bytes | None]], end: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    latest = {k: o for o, k, _ in recs if o < end and k is not None}
    return [r for r in recs if r[0] >= end or r[1] is None or latest[r[1]] == r[0]]


def fill(log: LocalLog, updates: int, keys: int, per_frame: int = 4) -> None:
    i = 0
    while i < updates:
        at = log.log_end_offset
        rows = [(b"k%d" % ((i + j) % keys), b"v%d" % (at + j)) for j in range(per_frame)]
        log.append([keyed(rows)], 0, NOW)
        i += per_frame


# --- pure parts ---------------------------------------------------------------------------


def seg(base: int, end: int, size: int = 100, max_ts: int = 0, sealed: bool = True) -> SegmentInfo:
    return SegmentInfo(base, end, size, sealed, f"/x/{base}", max_ts, 0)


def test_plan_respects_active_hw_tiering_and_lag() -> None:
    segs = [seg(0, 10), seg(10, 20), seg(20, 30, max_ts=NOW), seg(30, 35, sealed=False)]
    b = CleanBounds(high_watermark=35, tiered_end=None, now_ms=NOW, min_compaction_lag_ms=10)
    p = plan(segs, 0, b, tiered=False)
    assert p is not None and [s.base_offset for s in p.segments] == [0, 10]  # lag stops at 20
    assert plan(segs, 0, b._replace(high_watermark=15), tiered=False).segments == segs[:1]  # type: ignore[union-attr]
    assert plan(segs, 0, b._replace(tiered_end=None), tiered=True) is None  # nothing tiered
    assert plan(segs, 0, b._replace(tiered_end=12), tiered=True).end == 10  # type: ignore[union-attr]
    assert plan(segs, 20, b, tiered=False) is None  # all clean already
    p = plan(segs, 10, b, tiered=False)
    assert p is not None and p.dirty_start == 10 and p.dirty_ratio == 0.5


def test_offset_map_keeps_latest_nulls_and_fresh_tombstones() -> None:
    m = OffsetMap()
    frame = keyed([(b"a", b"1"), (b"b", b"1"), (None, b"x"), (b"a", b"2"), (b"c", None)], ts=5)
    batch = decode_records(frame)
    m.add(batch, 100)
    assert m.latest(b"a") == 103 and m.latest(b"c") == 104 and len(m) == 3
    assert m.keep_mask(batch, 100, tombstone_horizon_ms=0) == [False, True, True, True, True]
    assert m.keep_mask(batch, 100, tombstone_horizon_ms=6) == [False, True, True, True, False]
    assert m.keep_mask(batch, 90, 0)[:2] == [False, False]  # older copies of later keys


# --- the cleaner on a real log ------------------------------------------------------------


def small(env: LogEnv) -> LocalLog:
    return env.open(LogConfig(segment_bytes=4096))


def test_clean_keeps_latest_per_key_offsets_and_frame_tiling(env: LogEnv) -> None:
    log = small(env)
    fill(log, 400, keys=7)
    before = records(log)
    assert len(log.segments()) > 4
    r = LogCleaner().clean(log, COMPACT, log.log_end_offset, now_ms=NOW, force=True)
    assert r is not None and r.bytes_out < r.bytes_in
    end = log.segments()[-1].base_offset
    assert r.cleaned_to == end and read_checkpoint(log.dir) == end
    assert records(log) == model(before, end)
    # the next pass groups the now small clean segments (by input size, as Kafka)
    fill(log, 400, keys=7)
    before = records(log)
    r = LogCleaner().clean(log, COMPACT, log.log_end_offset, now_ms=NOW, force=True)
    assert r is not None and r.segments_out < r.segments_in
    end = log.segments()[-1].base_offset
    assert records(log) == model(before, end)
    assert log.log_end_offset == 800 and log.log_start_offset == 0
    # frames still tile the offsets: every frame starts where the previous ended
    nxt = 0
    for base, count in LogEnv.read_all(log):
        assert base == nxt
        nxt = base + count
    for clean in (True, False):  # clean shutdown, then a crash: same log
        log = env.reopen(LogConfig(segment_bytes=4096), clean=clean)
        assert records(log) == model(before, end)
    # nothing is dirty now: a second pass does nothing
    assert LogCleaner().clean(log, COMPACT, log.log_end_offset, now_ms=NOW, force=True) is None


def test_index_rebuild_after_clean_keeps_epochs(env: LogEnv) -> None:
    log = small(env)
    for epoch in (1, 2, 5):
        for i in range(60):
            log.append([keyed([(b"k%d" % (i % 3), b"e%d-%d" % (epoch, i))])], epoch, NOW)
    epochs = log.leader_epochs()
    log.roll()
    want = model(records(log), log.log_end_offset)
    LogCleaner().clean(log, COMPACT, log.log_end_offset, now_ms=NOW, force=True)
    assert records(log) == want
    log.close()
    env.index.close()
    shutil.rmtree(env.root / "index")
    from ingest.log.index import LogIndex

    env.index = LogIndex(str(env.root / "index"))
    log = env.open(LogConfig(segment_bytes=4096))
    assert records(log) == want
    assert log.leader_epochs() == epochs  # epoch starts survive in the frame headers


def test_tombstones_expire_by_timestamp_and_lag_protects_recent(env: LogEnv) -> None:
    log = small(env)
    log.append([keyed([(b"a", b"1"), (b"b", b"1")], ts=1_000)], 0, NOW)
    log.append([keyed([(b"a", None)], ts=1_000)], 0, NOW)  # old tombstone
    log.append([keyed([(b"b", None)], ts=NOW - 600)], 0, NOW)  # fresh tombstone
    log.roll()
    log.append([keyed([(b"c", b"1")], ts=NOW)], 0, NOW)
    log.roll()
    cfg = topic_config({**LOCAL, "delete.retention.ms": 1000, "min.compaction.lag.ms": 500})
    LogCleaner().clean(log, cfg, log.log_end_offset, now_ms=NOW, force=True)
    got = records(log)
    # first segment: a and its tombstone gone, b's fresh tombstone kept; the second segment
    # is younger than min.compaction.lag.ms and untouched
    assert got == [(3, b"b", None), (4, b"c", b"1")]


def test_producer_last_batch_survives_for_dedup(env: LogEnv) -> None:
    log = small(env)
    for i in range(30):
        batch = decode_records(keyed([(b"k", b"v%d" % i)], ts=NOW))
        frame = encode_frame(batch, producer_id=7, producer_epoch=0, base_sequence=i)
        log.append([frame], 0, NOW)
    log.roll()
    log.append([keyed([(b"k", b"later")], ts=NOW)], 0, NOW)  # supersedes the producer's data
    log.roll()
    LogCleaner().clean(log, COMPACT, log.log_end_offset, now_ms=NOW, force=True)
    assert [r[2] for r in records(log)] == [b"later"]
    # state rebuilt from the segments alone (no checkpoint): the last batch is known
    psm = ProducerStateManager(env.index, env.topic_id, env.partition)
    psm.rebuild(log)
    verdict = psm.check(7, 0, 29, 1)
    assert verdict.duplicate and verdict.base_offset == 29
    psm.check(7, 0, 30, 1)  # and the next sequence continues


def test_crash_leftovers_are_finished_or_dropped(env: LogEnv) -> None:
    log = small(env)
    fill(log, 200, keys=3)
    want = model(records(log), log.segments()[-1].base_offset)
    # 1. a crash while writing: a .cleaned file is dropped, the originals stay
    with open(segment_swap.cleaned_path(log.dir, 0), "wb") as f:
        f.write(b"partial")
    log = env.reopen(LogConfig(segment_bytes=4096), clean=False)
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    before = records(log)
    # 2. a crash right after the commit point: the .swap exists, the originals too
    cleaner = LogCleaner()
    swaps: list[str] = []
    orig = LocalLog.swap_cleaned

    def crash_at_commit(self: LocalLog, old, cleaned, frames) -> bool:  # type: ignore[no-untyped-def]
        swaps.append(segment_swap.commit(cleaned))
        raise SystemExit  # stands for kill -9 at the commit point

    LocalLog.swap_cleaned = crash_at_commit  # type: ignore[method-assign]
    try:
        with pytest.raises(SystemExit):
            cleaner.clean(log, COMPACT, log.log_end_offset, now_ms=NOW, force=True)
    finally:
        LocalLog.swap_cleaned = orig  # type: ignore[method-assign]
    assert swaps and os.path.exists(swaps[0])
    log = env.reopen(LogConfig(segment_bytes=4096), clean=False)
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    got = records(log)
    end = swaps_end(log)  # the first group was swapped in by recovery, the rest untouched
    assert got == [r for r in want if r[0] < end] + [r for r in before if r[0] >= end]


def swaps_end(log: LocalLog) -> int:
    return log.segments()[0].next_offset


def test_readers_during_swaps_never_see_junk(env: LogEnv) -> None:
    log = small(env)
    fill(log, 600, keys=5)
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                got = records(log)
                assert [o for o, _, _ in got] == sorted({o for o, _, _ in got})
                assert all(v is not None and v == b"v%d" % o for o, _, v in got)
            except BaseException as exc:  # reported below
                errors.append(exc)
                return

    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(5):
            fill(log, 100, keys=5)
            log.roll()
            LogCleaner().clean(log, COMPACT, log.log_end_offset, now_ms=NOW, force=True)
    finally:
        stop.set()
        t.join()
    assert not errors, errors


def test_tiering_reads_a_cleaned_segment(env: LogEnv) -> None:
    log = small(env)
    fill(log, 200, keys=3)
    log.roll()
    LogCleaner().clean(log, COMPACT, log.log_end_offset, now_ms=NOW, force=True)
    first = log.segments()[0]
    with open(first.path, "rb") as f:
        data = f.read()
    batches = list(iter_consumer_batches(data, first.base_offset, first.next_offset))
    offsets = [o for b in batches for o in b.column(0).to_pylist()]
    assert offsets == [o for o, _, _ in records(log) if o < first.next_offset]
