"""LocalLog: append, roll, read, time lookup, truncation, retention (real files + RocksDB)."""

from __future__ import annotations

import itertools
import os
import random

import pytest

from ingest.log.local_log import LogConfig
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import decode_records, verify_crc


def test_dense_offsets_across_many_appends_and_rolls(env, frame):
    log = env.open(LogConfig(segment_bytes=4_000))
    rng = random.Random(7)
    expected = 0
    for _ in range(120):
        group = [frame(rng.randint(1, 5)) for _ in range(rng.randint(1, 6))]
        ranges = log.append(group, leader_epoch=1, now_ms=1_000)
        for (base, last), f in zip(ranges, group, strict=True):
            n = int.from_bytes(f[26:30], "little")
            assert (base, last) == (expected, expected + n - 1)
            expected += n
    assert log.log_end_offset == expected
    segs = log.segments()
    assert len(segs) > 5
    assert all(s.sealed for s in segs[:-1]) and not segs[-1].sealed
    for a, b in itertools.pairwise(segs):
        assert a.next_offset == b.base_offset
        assert a.size <= 4_000
        assert os.path.getsize(a.path) == a.size
        assert os.path.basename(b.path) == f"{b.base_offset:020d}.log"
    frames = env.read_all(log)
    offsets = [b for b, _ in frames]
    assert offsets == sorted(offsets) and offsets[0] == 0
    assert sum(n for _, n in frames) == expected


def test_frames_are_stored_byte_exact_with_assigned_offsets(env, frame):
    log = env.open()
    log.append([frame(2)], leader_epoch=3, now_ms=1)
    f = frame(4, ts=[5, 6, 7, 8])
    log.append([f], leader_epoch=3, now_ms=1)
    [(header, data)] = log.read(2, 1 << 20)
    assert bytes(data) == bytes(f)  # assign() patched the caller's buffer in place
    assert (header.base_offset, header.leader_epoch, header.record_count) == (2, 3, 4)
    verify_crc(data, 0, header)
    batch = decode_records(data)
    assert batch.column(0).to_pylist() == [0, 1, 2, 3]


def test_roll_by_segment_ms_seals_and_survives_restart(env, frame):
    cfg = LogConfig(segment_bytes=1 << 20, segment_ms=1_000)
    log = env.open(cfg)
    assert not log.maybe_roll(10_000)  # an empty active segment never rolls
    log.append([frame()], 0, now_ms=5_000)
    log.append([frame()], 0, now_ms=5_500)
    assert not log.maybe_roll(5_999)
    assert log.active_segment.created_ms == 5_000
    log = env.reopen(cfg)  # created_ms is persisted: the schedule survives a restart
    assert log.active_segment.created_ms == 5_000
    assert log.maybe_roll(6_000)
    first, second = log.segments()
    assert first.sealed and first.next_offset == 6 and not second.sealed and second.size == 0
    # An append past segment.ms rolls first by itself.
    log.append([frame()], 0, now_ms=7_000)
    log.append([frame()], 0, now_ms=8_000)
    assert [s.base_offset for s in log.segments()] == [0, 6, 9]
    assert log.segments()[1].created_ms == 7_000


def test_frame_bigger_than_segment_bytes_goes_alone(env, frame):
    log = env.open(LogConfig(segment_bytes=1_500))
    small, big = frame(1), frame(20, value_size=200)
    assert len(big) > 1_500
    log.append([small, big, frame(1)], 0, 1)
    segs = log.segments()
    assert [(s.base_offset, s.next_offset) for s in segs] == [(0, 1), (1, 21), (21, 22)]
    assert segs[1].size == len(big)
    log.append([frame(20, value_size=200)], 0, 1)
    assert [s.base_offset for s in log.segments()] == [0, 1, 21, 22]


def test_group_commit_spanning_segments_is_split(env, frame):
    log = env.open(LogConfig(segment_bytes=2_000))
    frames = [frame(2) for _ in range(12)]
    size = len(frames[0])
    ranges = log.append(frames, 0, 1)
    assert [b for b, _ in ranges] == list(range(0, 24, 2))
    per_segment = 2_000 // size
    assert [s.size for s in log.segments()[:-1]] == [per_segment * size] * (len(log.segments()) - 1)
    assert env.read_all(log) == [(b, 2) for b in range(0, 24, 2)]


def test_append_rejects_a_non_frame(env, frame):
    log = env.open()
    bad = frame()[:-1]
    with pytest.raises(TierlogError) as err:
        log.append([frame(), bytearray(bad)], 0, 1)
    assert err.value.code is ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_read_positions_limits_and_ranges(env, frame):
    log = env.open(LogConfig(segment_bytes=3_000))
    for _ in range(10):
        log.append([frame(5), frame(5)], 0, 1)  # frames at 0, 5, 10, ...
    size = len(frame(5))
    leo = log.log_end_offset
    assert leo == 100
    for offset in (0, 3, 5, 49, 50, 97):  # middle of frames and boundaries
        frames = log.read(offset, 1)
        assert len(frames) == 1  # at least one frame, even over max_bytes
        assert frames[0][0].base_offset == offset - offset % 5
    assert log.read(leo, 1 << 20) == []
    for bad in (-1, leo + 1):
        with pytest.raises(TierlogError) as err:
            log.read(bad, 100)
        assert err.value.code is ErrorCode.OFFSET_OUT_OF_RANGE
    # max_bytes: whole frames only, crossing segment boundaries.
    frames = log.read(7, size * 4)
    assert [h.base_offset for h, _ in frames] == [5, 10, 15, 20]
    frames = log.read(7, size * 4 + size - 1)
    assert [h.base_offset for h, _ in frames] == [5, 10, 15, 20]
    assert sum(len(d) for _, d in log.read(0, 1 << 20)) == leo // 5 * size
    # max_offset (the high watermark): frames starting at or above it are not returned.
    assert [h.base_offset for h, _ in log.read(0, 1 << 20, max_offset=12)] == [0, 5, 10]
    assert [h.base_offset for h, _ in log.read(0, 1 << 20, max_offset=10)] == [0, 5]
    assert log.read(10, 1 << 20, max_offset=10) == []


def test_offset_for_timestamp_with_non_monotonic_timestamps(env, frame):
    log = env.open(LogConfig(segment_bytes=1_200))
    stamps = [[50, 10, 30], [20, 80, 40], [70, 70, 90], [5, 5, 5], [100, 60, 95], [60]]
    for ts in stamps:
        log.append([frame(len(ts), ts=ts)], 0, 1)
    flat = [t for ts in stamps for t in ts]
    assert len(log.segments()) > 1
    for target in range(0, 110, 3):
        want = next((i for i, t in enumerate(flat) if t >= target), None)
        assert log.offset_for_timestamp(target) == want, target
    log = env.reopen(LogConfig(segment_bytes=1_200))
    assert log.offset_for_timestamp(85) == 8


def test_truncate_to_frame_boundary_and_inside_frame(env, frame):
    log = env.open(LogConfig(segment_bytes=1_500))
    for i in range(8):
        log.append([frame(4, ts=100 + i)], leader_epoch=i // 3, now_ms=1)
    assert len(log.segments()) > 2
    assert log.truncate_to(32) == 32  # at/after the end: nothing to do
    assert log.truncate_to(20) == 20  # a frame boundary
    assert log.truncate_to(14) == 12  # inside a frame: the whole frame goes
    assert log.log_end_offset == 12
    assert env.read_all(log) == [(0, 4), (4, 4), (8, 4)]
    assert log.offset_for_timestamp(103) is None
    assert log.offset_for_timestamp(102) == 8
    assert log.leader_epochs() == [(0, 0)]  # epoch 1 started at 12: truncated away
    assert log.segments()[-1].next_offset == 12 and not log.segments()[-1].sealed
    assert log.append([frame(2, ts=500)], leader_epoch=5, now_ms=1) == [(12, 13)]
    assert log.offset_for_timestamp(200) == 12
    assert log.leader_epochs() == [(0, 0), (5, 12)]
    log = env.reopen(LogConfig(segment_bytes=1_500), clean=False)
    assert env.read_all(log) == [(0, 4), (4, 4), (8, 4), (12, 2)]
    assert log.truncate_to(0) == 0
    assert log.log_end_offset == 0 and env.read_all(log) == []
    assert log.append([frame(1)], 6, 1) == [(0, 0)]


def test_truncate_at_the_end_drops_an_epoch_begun_without_appends(env, frame):
    """Issue 12 found 1: a broker that led an epoch without writing keeps that epoch's start
    at its log end. When the next leader answers "diverging at the end of epoch 0", the
    truncation cuts no bytes but must still forget epoch 1, or every fetch repeats it."""
    log = env.open()
    log.append([frame(3)], leader_epoch=0, now_ms=1)
    log.begin_epoch(1)  # became leader at offset 3, replaced before appending
    assert log.leader_epochs() == [(0, 0), (1, 3)] and log.latest_epoch == 1
    assert log.truncate_to(3) == 3  # the leader: epoch 0 ends at 3
    assert log.leader_epochs() == [(0, 0)] and log.latest_epoch == 0
    assert log.end_offset_for_epoch(1) == (0, 3)  # no longer claims an epoch it never had
    assert log.truncate_to(3) == 3 and log.leader_epochs() == [(0, 0)]  # idempotent
    assert log.append([frame(2)], leader_epoch=2, now_ms=1) == [(3, 4)]
    assert log.leader_epochs() == [(0, 0), (2, 3)]
    log = env.reopen()
    assert log.leader_epochs() == [(0, 0), (2, 3)] and log.latest_epoch == 2


def test_retention_deletes_whole_segments_and_keeps_time_lookups(env, frame):
    log = env.open(LogConfig(segment_bytes=1_000))
    for i in range(12):
        log.append([frame(2, ts=[10 * i, 10 * i + 5])], 0, 1)
    segs = log.segments()
    assert len(segs) >= 4
    cut = segs[2].base_offset
    gone = log.delete_segments_before(cut + 1)  # segment 2 still holds cut
    assert [s.base_offset for s in gone] == [segs[0].base_offset, segs[1].base_offset]
    assert not any(os.path.exists(s.path) for s in gone)
    assert log.log_start_offset == cut
    with pytest.raises(TierlogError):
        log.read(cut - 1, 100)
    assert log.read(cut, 100)[0][0].base_offset == cut
    assert log.offset_for_timestamp(0) == cut  # clamped to the log start
    assert log.offset_for_timestamp(10 * (cut // 2) + 5) == cut + 1
    log.advance_log_start(cut + 1)
    assert log.log_start_offset == cut + 1
    assert log.offset_for_timestamp(0) == cut + 1
    log = env.reopen(LogConfig(segment_bytes=1_000))
    assert log.log_start_offset == cut + 1
    assert log.delete_segments_before(10**9)  # everything but the active segment
    assert len(log.segments()) == 1


def test_leader_epochs_and_replicated_appends(env, frame):
    leader = env.open()
    leader.append([frame(2), frame(3)], leader_epoch=1, now_ms=1)
    leader.append([frame(1)], leader_epoch=4, now_ms=1)
    assert leader.leader_epochs() == [(1, 0), (4, 5)]
    assert leader.end_offset_for_epoch(1) == (1, 5)
    assert leader.end_offset_for_epoch(3) == (1, 5)
    assert leader.end_offset_for_epoch(9) == (4, 6)
    assert leader.end_offset_for_epoch(0) is None
    payload = b"".join(bytes(d) for _, d in leader.read(0, 1 << 20))

    env.partition = 1  # a follower replica in the same data dir
    follower = env.open()
    with pytest.raises(TierlogError) as err:
        follower.append_replicated(payload[: len(payload) // 2])
    assert err.value.code is ErrorCode.CORRUPT_MESSAGE
    assert follower.log_end_offset == 0
    assert follower.append_replicated(payload) == [(0, 1), (2, 4), (5, 5)]
    assert follower.leader_epochs() == [(1, 0), (4, 5)]
    with pytest.raises(TierlogError) as err:
        follower.append_replicated(payload)  # does not continue the log
    assert err.value.code is ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(TierlogError):
        follower.append_replicated(payload[:-3])  # torn
    assert [bytes(d) for _, d in follower.read(0, 1 << 20)] == [
        bytes(d) for _, d in leader.read(0, 1 << 20)
    ]
    follower.close()


def test_failed_write_takes_the_log_offline_until_reopened(env, frame, monkeypatch):
    log = env.open()
    log.append([frame(2)], 0, 1)
    assert log.append([], 0, 1) == []

    def disk_full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", disk_full)
    with pytest.raises(TierlogError) as err:
        log.append([frame(2)], 0, 1)
    assert err.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.undo()
    with pytest.raises(TierlogError):
        log.append([frame(2)], 0, 1)  # offline: offsets must not be reused
    assert not log.maybe_roll(10**12)
    log = env.reopen(clean=False)
    assert log.append([frame(2)], 0, 1) == [(2, 3)]
