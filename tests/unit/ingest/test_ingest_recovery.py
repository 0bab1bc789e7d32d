"""Crash recovery: torn tails, corrupt frames, lost or stale index entries, odd files."""

from __future__ import annotations

import logging
import os
import shutil

import pytest

from ingest.log.local_log import LogConfig
from logformat.frame import HEADER_SIZE

CFG = LogConfig(segment_bytes=2_000)


def _fill(log, frame, n_frames: int, records: int = 3) -> list[int]:
    sizes = []
    for i in range(n_frames):
        f = frame(records, ts=1_000 + i)
        log.append([f], leader_epoch=2, now_ms=1)
        sizes.append(len(f))
    return sizes


def test_clean_reopen_keeps_everything_without_rescan(env, frame, caplog):
    log = env.open(CFG)
    _fill(log, frame, 15)
    before = (log.segments(), env.read_all(log), log.log_end_offset)
    caplog.set_level(logging.INFO, "ingest.log.local_log")
    log = env.reopen(CFG)
    assert (log.segments(), env.read_all(log), log.log_end_offset) == before
    (done,) = [r for r in caplog.records if r.getMessage() == "log recovered"]
    assert done.__dict__["clean_shutdown"] is True and done.__dict__["frames_reindexed"] == 0
    assert log.append([frame(2)], 2, 1) == [(45, 46)]


def test_torn_tail_at_every_cut_inside_the_last_frame(env, frame):
    log = env.open(CFG)
    sizes = _fill(log, frame, 8)
    active = env.segment_files()[-1]
    full = active.read_bytes()
    last_size = sizes[-1]
    frames_in_active = len(env.read_all(log, log.active_segment.base_offset))
    base_active = log.active_segment.base_offset
    env.crash()
    keep = len(full) - last_size
    cuts = list(range(keep + 1, keep + HEADER_SIZE + 1))  # inside the header
    cuts += [*range(keep + HEADER_SIZE + 1, len(full), 17), len(full) - 1]
    for cut in cuts:
        active.write_bytes(full[:cut])
        log = env.open(CFG)
        assert active.stat().st_size == keep, cut
        assert log.log_end_offset == base_active + 3 * (frames_in_active - 1)
        assert env.read_all(log)[-1][0] == log.log_end_offset - 3
        env.crash()
    log = env.open(CFG)
    leo = log.log_end_offset
    assert log.append([frame(2)], 2, 1) == [(leo, leo + 1)]
    assert [b for b, _ in env.read_all(log)] == [*range(0, leo, 3), leo]


def test_torn_tail_leaves_previous_appends_intact_at_scale(env, frame):
    log = env.open(LogConfig(segment_bytes=1 << 20))
    for _ in range(50):
        log.append([frame(3) for _ in range(4)], 0, 1)
    env.crash()
    seg = env.segment_files()[-1]
    with open(seg, "ab") as f:
        f.write(b"\0" * 4096)  # e.g. a preallocated, never-written tail after power loss
    log = env.open(LogConfig(segment_bytes=1 << 20))
    assert log.log_end_offset == 600
    assert len(env.read_all(log)) == 200


def test_flipped_payload_byte_drops_the_frame_by_crc(env, frame):
    log = env.open(CFG)
    sizes = _fill(log, frame, 4)
    env.crash()
    path = env.segment_files()[-1]
    data = bytearray(path.read_bytes())
    data[-sizes[-1] // 3] ^= 0x40  # inside the Arrow payload of the last frame
    path.write_bytes(bytes(data))
    log = env.open(CFG)
    assert log.log_end_offset == 9
    assert path.stat().st_size == len(data) - sizes[-1]
    assert log.append([frame(1)], 2, 1) == [(9, 9)]


def test_deleted_index_is_rebuilt_from_segment_files(env, frame):
    log = env.open(CFG)
    for i in range(30):
        log.append([frame(2, ts=[5_000 - i, 10 * i])], leader_epoch=i // 10, now_ms=1_000 + i)
    before = (
        env.read_all(log),
        log.log_end_offset,
        [s[:4] for s in log.segments()],
        log.leader_epochs(),
    )
    by_ts = {t: log.offset_for_timestamp(t) for t in range(0, 5_100, 97)}
    log.close()
    env.log = None
    env.index.close()
    shutil.rmtree(env.root / "index")
    env.index = type(env.index)(str(env.root / "index"))
    log = env.open(CFG)
    assert (
        env.read_all(log),
        log.log_end_offset,
        [s[:4] for s in log.segments()],
        log.leader_epochs(),
    ) == before
    assert log.leader_epochs() == [(0, 0), (1, 20), (2, 40)]
    assert {t: log.offset_for_timestamp(t) for t in by_ts} == by_ts
    assert all(s.created_ms > 0 for s in log.segments()[:-1])
    assert log.append([frame(1)], 0, 1) == [(60, 60)]


def test_index_entries_past_the_file_end_are_removed(env, frame):
    """Index batch written, file bytes lost (power loss before writeback)."""
    log = env.open(CFG)
    sizes = _fill(log, frame, 12)
    n_segments = len(log.segments())
    env.crash()
    files = env.segment_files()
    files[-1].unlink()  # the whole last segment is gone ...
    prev = files[-2]
    with open(prev, "r+b") as f:  # ... and the tail of the one before
        f.truncate(prev.stat().st_size - sizes[0])
    log = env.open(CFG)
    # The cut segment was sealed (maybe tiered already): a fresh active segment follows it.
    *_, cut, active = log.segments()
    assert len(log.segments()) == n_segments and cut.sealed
    leo = log.log_end_offset
    assert active.base_offset == leo == cut.next_offset
    assert env.read_all(log)[-1] == (leo - 3, 3)
    assert log.index.last_frame().next_offset == leo
    assert log.offset_for_timestamp(1_011) is None
    assert not log.segments()[-1].sealed
    assert log.append([frame(3)], 2, 1) == [(leo, leo + 2)]
    assert env.read_all(log)[-1] == (leo, 3)


def test_sealed_segment_missing_from_index_is_reindexed(env, frame):
    log = env.open(CFG)
    _fill(log, frame, 12)
    segs = log.segments()
    mid = segs[1]
    env.index.drop_range(env.topic_id, env.partition, mid.base_offset, mid.next_offset)
    log = env.reopen(CFG)  # even after a clean shutdown each segment's coverage is checked
    assert [b for b, _ in env.read_all(log)] == list(range(0, 36, 3))
    # Its segment entry went too: created_ms falls back to the file's mtime.
    assert [s[:6] for s in log.segments()] == [s[:6] for s in segs]


def test_zero_length_trailing_segment_and_unparsable_names(env, frame, caplog):
    log = env.open(CFG)
    _fill(log, frame, 3)
    log.roll()
    assert log.segments()[-1].size == 0
    env.crash()
    (env.dir / "garbage.log").write_bytes(b"x")
    (env.dir / "notes.txt").write_text("hello")
    caplog.set_level(logging.WARNING)
    log = env.open(CFG)
    assert "unparsable segment file" in caplog.text
    assert (env.dir / "garbage.log").exists()
    assert [s.base_offset for s in log.segments()] == [0, 6, 9]
    assert log.segments()[-1].size == 0 and not log.segments()[-1].sealed
    assert log.append([frame(1)], 2, 1) == [(9, 9)]


def test_empty_trailing_segment_after_cut_is_replaced(env, frame):
    log = env.open(CFG)
    _fill(log, frame, 3)
    env.crash()
    (env.dir / f"{50:020d}.log").write_bytes(b"")  # does not continue the offsets
    log = env.open(CFG)
    assert [s.base_offset for s in log.segments()] == [0, 6]
    assert not (env.dir / f"{50:020d}.log").exists()
    assert log.log_end_offset == 9


def test_last_sealed_segment_is_never_reopened_for_appends(env, frame):
    """A roll that crashed after recording the seal, before creating the next file."""
    log = env.open(CFG)
    _fill(log, frame, 2)
    log.roll()
    env.crash()
    env.segment_files()[-1].unlink()
    log = env.open(CFG)
    first, active = log.segments()
    assert first.sealed and active.base_offset == 6 and not active.sealed
    assert log.append([frame(1)], 2, 1) == [(6, 6)]
    assert first.size == os.path.getsize(first.path)


@pytest.mark.parametrize("clean", [True, False])
def test_stale_directory_of_a_deleted_topic_is_wiped(env, frame, clean):
    log = env.open(CFG)
    _fill(log, frame, 5)
    if clean:
        log.close()
    else:
        env.crash()
    env.log = None
    old_id = env.topic_id
    env.topic_id = "5f1f7a1e-0000-4000-8000-000000000001"
    log = env.open(CFG)
    assert log.log_end_offset == 0 and env.read_all(log) == []
    assert log.offset_for_timestamp(0) is None
    assert env.index.partition(old_id, env.partition).last_frame() is None
    assert log.append([frame(2)], 0, 1) == [(0, 1)]
