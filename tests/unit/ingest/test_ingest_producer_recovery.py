"""Idempotent-producer state that outlives a process: followers applying frames, snapshots,
rebuild from frames after a crash or a lost index, truncation, checkpoints, retention, expiry.

All on a real LocalLog and a real rocksdict index in tmp_path (the `env` fixture of
conftest.py).
"""

from __future__ import annotations

import pytest

from ingest.log.local_log import LocalLog, LogConfig
from ingest.unified.producer_state import (
    APPEND,
    MAX_SEQUENCE,
    ProducerStateManager,
    iter_frame_headers,
)
from logformat.frame import iter_headers
from tests.unit.ingest.producer_frames import PID, drain, manager, pframe

# --- followers, persistence, rebuild ---


def leader_log(env, m: ProducerStateManager, cfg: LogConfig | None = None) -> LocalLog:
    """A log of producers 1 (epochs 0 then 1), 2 and plain frames, appended by drains."""
    plog = env.open(cfg)
    seqs = {1: 0, 2: 0}
    for i in range(30):
        pid = 1 if i % 3 else 2
        if i == 20:
            seqs[1] = 0
        epoch = 1 if pid == 1 and i >= 20 else 0
        reqs = [[pframe(pid=pid, epoch=epoch, seq=seqs[pid], n=2, ts=1_000 + i)]]
        if i % 7 == 0:
            reqs.append([pframe(pid=-1, epoch=-1, seq=-1, n=1)])
        drain(plog, m, reqs)
        seqs[pid] += 2
    return plog


def test_follower_applying_frames_has_the_leaders_state(env, tmp_path):
    m = manager(env)
    plog = leader_log(env, m)
    follower = manager(env)  # (same index db; a fresh manager stands for another broker)
    offset = 0
    while offset < plog.log_end_offset:
        for header, data in plog.read(offset, 4096):
            for _, h in iter_headers(data):
                follower.apply_frame(h)
            offset = header.next_offset
    assert follower.producers() == m.producers()
    assert follower.end_offset == m.end_offset == plog.log_end_offset
    assert follower.entry(1).epoch == 1 and follower.entry(1).last_timestamp == 1_029


def test_snapshot_load_round_trip(env, bare):
    bare.update(1, 2, MAX_SEQUENCE, 3, 10, 12, timestamp_ms=77)
    for k in range(7):
        bare.update(5, 0, k, 1, 20 + k, 20 + k, timestamp_ms=-5)
    data = bare.snapshot()
    other = manager(env)
    other.load(data)
    assert other.producers() == bare.producers() and other.end_offset == 27
    assert len(data) < 200
    for bad in (data[:-1], data + b"x", b"\x09" + data[1:], b""):
        with pytest.raises(ValueError):
            other.load(bad)


def test_rebuild_from_frames_after_losing_the_index_state(env):
    m = manager(env)
    plog = leader_log(env, m)
    m.checkpoint(plog)
    expected = m.producers()
    # No checkpoint at all (index state lost): replay every frame from the log start.
    fresh = manager(env)
    fresh.reset(plog)  # drops the checkpoints (the log itself is untouched here)
    fresh._end = 0
    assert fresh.rebuild(plog) == 35
    assert fresh.producers() == expected and fresh.end_offset == plog.log_end_offset


def test_rebuild_replays_only_after_the_checkpoint_and_after_a_crash(env):
    m = manager(env)
    plog = leader_log(env, m)
    m.checkpoint(plog)
    at = plog.log_end_offset
    drain(plog, m, [[pframe(pid=2, seq=20, n=4)], [pframe(pid=3, seq=0, n=1)]])
    expected = m.producers()
    env.crash()  # no clean close: the checkpoint is older than the log end
    plog = env.open()
    again = manager(env)
    assert again.rebuild(plog) == 2  # only the two frames after the checkpoint
    assert again.producers() == expected
    assert at < again.end_offset == plog.log_end_offset


def test_truncation_drops_state_of_truncated_frames(env):
    m = manager(env)
    plog = leader_log(env, m, LogConfig(segment_bytes=2_000))
    assert len(plog.segments()) > 3
    mid = plog.segments()[2].base_offset
    m.checkpoint(plog)  # at the log end: above the truncation point, so it must go
    cut = plog.index.frames(mid + 5).__next__().base_offset
    want = manager(env)
    for h in iter_frame_headers(plog, 0, cut):
        want.apply_frame(h)
    plog.truncate_to(cut)
    assert m.on_truncate(plog) > 0
    assert m.producers() == want.producers() and m.end_offset == cut
    assert m._checkpoint_offsets() == []  # the one above the cut is deleted
    assert m.on_truncate(plog) == 0  # nothing applied above the log end: no work


def test_truncation_uses_a_checkpoint_below_the_cut(env):
    m = manager(env)
    plog = leader_log(env, m, LogConfig(segment_bytes=2_000))
    cut = [b for b, _ in env.read_all(plog)][-3]
    early = [b for b, _ in env.read_all(plog)][-6]
    want = manager(env)
    for h in iter_frame_headers(plog, 0, cut):
        want.apply_frame(h)
    m.rebuild(plog)  # re-derive, then checkpoint at `early` by replaying only that far
    m.reset(plog)
    m._end = 0
    m.replay(plog, 0, early)
    m.checkpoint(plog)
    m.replay(plog, early)
    plog.truncate_to(cut)
    assert m.on_truncate(plog) == 3  # from the checkpoint at `early`, not from the start
    assert m.producers() == want.producers()


def test_a_stale_checkpoint_is_recognised_by_its_leader_epoch(env):
    """A crash between truncation and on_truncate, then a new leader appends past the old
    checkpoint: the checkpoint's offset is below the log end, but its history is not ours."""
    m = manager(env)
    plog = env.open()
    drain(plog, m, [[pframe(seq=0, n=2)], [pframe(seq=2, n=2)], [pframe(seq=4, n=2)]])
    m.checkpoint(plog)  # at 6, epoch 0
    plog.truncate_to(2)  # (and no on_truncate: the crash)
    plog.begin_epoch(5)
    plog.append([pframe(seq=2, n=1), pframe(pid=8, seq=0, n=6)], leader_epoch=5, now_ms=1)
    fresh = manager(env)
    assert fresh.rebuild(plog) == 3  # the checkpoint at 6 was rejected: full replay
    assert fresh.entry(PID).last_seq == 2 and fresh.entry(8) is not None
    assert fresh._checkpoint_offsets() == []


def test_reset_after_starting_over(env):
    m = manager(env)
    plog = leader_log(env, m)
    m.checkpoint(plog)
    plog.truncate_fully_and_start_at(500)
    m.reset(plog)
    assert m.producers() == {} and m.end_offset == 500
    assert manager(env).rebuild(plog) == 0


def test_maybe_checkpoint_after_a_roll(env):
    m = manager(env)
    plog = leader_log(env, m, LogConfig(segment_bytes=2_000))
    assert m.maybe_checkpoint(plog)
    assert not m.maybe_checkpoint(plog)  # no roll since
    rolled, seq = plog.active_segment.base_offset, 0
    while plog.active_segment.base_offset == rolled:
        drain(plog, m, [[pframe(pid=4, seq=seq)]])
        seq += 2
    assert m.maybe_checkpoint(plog)
    assert m._checkpoint_offsets()[-1] == plog.log_end_offset


def test_state_outlives_retention(env):
    m = manager(env)
    plog = leader_log(env, m, LogConfig(segment_bytes=2_000))
    m.checkpoint(plog)
    expected = m.producers()
    plog.delete_segments_before(plog.active_segment.base_offset)
    plog.advance_log_start(plog.log_end_offset)
    again = manager(env)
    assert again.rebuild(plog) == 0  # a checkpoint at the log start: nothing to replay
    assert again.producers() == expected  # kept although its frames are gone (KIP-360)
    # Without a checkpoint only what is left of the log can be replayed.
    again.reset(plog)
    assert manager(env).rebuild(plog) == 0


def test_checkpoints_are_pruned(env):
    m = manager(env, max_checkpoints=2)
    plog = env.open()
    for seq in range(4):
        drain(plog, m, [[pframe(seq=seq * 2)]])
        m.checkpoint(plog)
    assert m._checkpoint_offsets() == [6, 8]


def test_expiry(bare):
    day = 24 * 3600 * 1000
    bare.update(1, 0, 0, 1, 0, 0, timestamp_ms=0)
    bare.update(2, 0, 0, 1, 1, 1, timestamp_ms=3 * day)
    assert bare.expire(7 * day - 1) == []
    assert bare.expire(7 * day) == [1]
    assert set(bare.producers()) == {2}
    assert bare.check(1, 0, 40, 1) == APPEND  # expired: unknown again, any sequence
