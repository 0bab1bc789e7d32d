"""Idempotent-producer state: validation, staging within a drain, persistence, rebuild.

Pure checks run on the manager alone; persistence and rebuild use a real LocalLog and a
real rocksdict index in tmp_path (the `env` fixture of conftest.py).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from ingest.log.local_log import LocalLog, LogConfig
from ingest.unified.producer_state import (
    APPEND,
    MAX_SEQUENCE,
    PendingAppends,
    ProducerStateManager,
    Verdict,
    add_seq,
    iter_frame_headers,
)
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import decode_header, encode_frame, iter_headers
from logformat.schema import HEADERS, RECORD_SCHEMA, TIMESTAMP

PID = 42


def pframe(pid: int = PID, epoch: int = 0, seq: int = 0, n: int = 2, ts: int = 1_000) -> bytearray:
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(range(n), pa.int32()),
            pa.array([ts] * n, TIMESTAMP),
            pa.array([b"k"] * n, pa.binary()),
            pa.array([b"v" * 8] * n, pa.binary()),
            pa.array([None] * n, HEADERS),
        ],
        schema=RECORD_SCHEMA,
    )
    return encode_frame(batch, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def manager(env, **kwargs) -> ProducerStateManager:
    return ProducerStateManager(env.index, env.topic_id, env.partition, **kwargs)


Answer = list[tuple[int, int]] | TierlogError


def drain(
    plog: LocalLog, mgr: ProducerStateManager, requests: list[list[bytearray]]
) -> list[Answer]:
    """The leader's group-commit drain, as Partition._drain should call the manager."""
    pending = mgr.begin(plog.log_end_offset)
    plan: list[tuple[int, list[Verdict]] | TierlogError] = []
    to_write: list[bytearray] = []
    for request in requests:
        mark = pending.mark()
        try:
            verdicts = []
            for frame in request:
                h = decode_header(frame)
                verdicts.append(
                    pending.check_and_stage(
                        h.producer_id,
                        h.producer_epoch,
                        h.base_sequence,
                        h.record_count,
                        h.max_timestamp,
                    )
                )
        except TierlogError as exc:
            pending.rollback(mark)
            plan.append(exc)
            continue
        plan.append((len(to_write), verdicts))
        to_write += [f for f, v in zip(request, verdicts, strict=True) if not v.duplicate]
    ranges = plog.append(to_write, leader_epoch=max(plog.latest_epoch, 0), now_ms=1)
    pending.commit(ranges)
    out: list[Answer] = []
    for item in plan:
        if isinstance(item, TierlogError):
            out.append(item)
            continue
        i, verdicts = item
        answer = []
        for v in verdicts:
            if v.duplicate:
                answer.append((v.base_offset, v.last_offset))
            else:
                answer.append(ranges[i])
                i += 1
        out.append(answer)
    return out


def code(exc: pytest.ExceptionInfo[TierlogError]) -> ErrorCode:
    return exc.value.code


# --- validation (pure) ---


@pytest.fixture
def bare(env) -> ProducerStateManager:
    return manager(env)


def test_in_order_batches_are_appended(bare):
    off = 0
    for seq in range(0, 30, 3):
        assert bare.check(PID, 0, seq, 3) == APPEND
        bare.update(PID, 0, seq, 3, off, off + 2, timestamp_ms=5)
        off += 3
    e = bare.entry(PID)
    assert e is not None and e.epoch == 0 and e.last_seq == 29 and len(e.batches) == 5
    assert [b.first_seq for b in e.batches] == [15, 18, 21, 24, 27]
    assert bare.end_offset == 30


def test_duplicates_of_the_last_five_return_original_offsets(bare):
    for k in range(8):
        bare.update(PID, 0, k * 2, 2, 100 + k * 10, 101 + k * 10)
    for k in range(3, 8):  # the cached five
        assert bare.check(PID, 0, k * 2, 2) == Verdict(True, 100 + k * 10, 101 + k * 10)
    for k in range(3):  # older than the cache: Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER
        with pytest.raises(TierlogError) as exc:
            bare.check(PID, 0, k * 2, 2)
        assert code(exc) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(TierlogError) as exc:  # same first sequence, different length
        bare.check(PID, 0, 14, 1)
    assert code(exc) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_gap_is_out_of_order_naming_expected_and_got(bare):
    bare.update(PID, 0, 0, 5, 0, 4)
    with pytest.raises(TierlogError) as exc:
        bare.check(PID, 0, 7, 1)
    assert code(exc) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "expected sequence 5, got 7" in exc.value.message
    assert exc.value.extra == {"expected_sequence": 5, "sequence": 7}
    assert exc.value.http_status == 409


def test_epoch_bump_resets_sequences_and_fences_the_old_epoch(bare):
    bare.update(PID, 3, 0, 10, 0, 9)
    with pytest.raises(TierlogError) as exc:  # a new epoch must start at 0
        bare.check(PID, 4, 10, 1)
    assert code(exc) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert bare.check(PID, 4, 0, 2) == APPEND
    bare.update(PID, 4, 0, 2, 10, 11)
    assert bare.entry(PID).epoch == 4 and len(bare.entry(PID).batches) == 1
    for seq in (0, 10):  # the zombie of epoch 3: fenced, whether a retry or a new batch
        with pytest.raises(TierlogError) as exc:
            bare.check(PID, 3, seq, 10 if seq == 0 else 1)
        assert code(exc) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert bare.check(PID, 4, 0, 2) == Verdict(True, 10, 11)
    assert bare.check(PID, 4, 2, 1) == APPEND


def test_unknown_producer_and_bad_fields(env):
    m = manager(env)
    assert m.check(7, 0, 12345, 3) == APPEND  # KIP-360: no state → any sequence
    assert m.check(-1, -1, -1, 3) == APPEND  # not idempotent: never checked
    strict = manager(env, reject_unknown_nonzero_sequence=True)
    assert strict.check(7, 0, 0, 3) == APPEND
    with pytest.raises(TierlogError) as exc:
        strict.check(7, 0, 12345, 3)
    assert code(exc) is ErrorCode.UNKNOWN_PRODUCER_ID
    for args in [
        (-2, 0, 0, 1),
        (7, -1, 0, 1),
        (7, 0, -1, 1),
        (7, 0, MAX_SEQUENCE + 1, 1),
        (7, 0, 0, 0),
        (7, 1 << 15, 0, 1),
    ]:
        with pytest.raises(TierlogError) as exc:
            m.check(*args)
        assert code(exc) is ErrorCode.INVALID_RECORD


def test_sequence_wraps_at_int32_max(bare):
    assert add_seq(MAX_SEQUENCE, 1) == 0 and add_seq(MAX_SEQUENCE - 1, 4) == 2
    bare.update(PID, 0, MAX_SEQUENCE - 3, 2, 0, 1)  # ..-3, ..-2
    assert bare.check(PID, 0, MAX_SEQUENCE - 1, 4) == APPEND  # ..-1, MAX, 0, 1
    bare.update(PID, 0, MAX_SEQUENCE - 1, 4, 2, 5)
    assert bare.entry(PID).last_seq == 1
    assert bare.check(PID, 0, MAX_SEQUENCE - 1, 4) == Verdict(True, 2, 5)  # wrapped duplicate
    assert bare.check(PID, 0, 2, 1) == APPEND
    with pytest.raises(TierlogError) as exc:
        bare.check(PID, 0, MAX_SEQUENCE, 1)
    assert "expected sequence 2, got 2147483647" in exc.value.message
    bare.update(PID, 0, 2, MAX_SEQUENCE - 1, 6, MAX_SEQUENCE + 4)  # 2 .. MAX exactly
    assert bare.entry(PID).last_seq == MAX_SEQUENCE and bare.check(PID, 0, 0, 1) == APPEND


def test_update_is_idempotent_for_replayed_batches(bare):
    bare.update(PID, 0, 0, 2, 0, 1)
    bare.update(PID, 0, 2, 2, 2, 3)
    before = bare.producers()
    bare.update(PID, 0, 0, 2, 0, 1)  # replaying an already applied frame changes nothing
    assert bare.producers() == before


# --- staging within one group-commit drain ---


def test_staged_checks_see_earlier_requests_of_the_same_drain(bare):
    bare.update(PID, 0, 0, 2, 0, 1)
    pending = bare.begin(next_offset=2)
    assert pending.check_and_stage(PID, 0, 2, 3) == APPEND  # offsets 2..4
    assert pending.check_and_stage(-1, -1, -1, 4) == APPEND  # plain frame: 5..8
    assert pending.check(PID, 0, 5, 1) == APPEND  # continues the staged batch
    with pytest.raises(TierlogError):
        bare.check(PID, 0, 5, 1)  # the committed state does not know the staged batch
    assert pending.check_and_stage(PID, 0, 2, 3) == Verdict(True, 2, 4, in_flight=True)
    assert pending.check_and_stage(PID, 0, 0, 2) == Verdict(True, 0, 1, in_flight=False)
    with pytest.raises(TierlogError) as exc:
        pending.check_and_stage(PID, 0, 2, 1)
    assert code(exc) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert pending.next_offset == 9 and pending.staged_count == 2
    assert bare.entry(PID).last_seq == 1 and bare.end_offset == 2  # nothing mutated yet
    with pytest.raises(ValueError):
        pending.commit([(2, 4)])
    pending.commit([(2, 4), (5, 8)])
    assert bare.entry(PID).last_seq == 4 and bare.end_offset == 9


def test_rollback_unstages_a_failed_request(bare):
    pending: PendingAppends = bare.begin(0)
    assert pending.check_and_stage(1, 0, 0, 1) == APPEND
    mark = pending.mark()
    pending.check_and_stage(1, 0, 1, 1)
    pending.check_and_stage(2, 0, 0, 1)
    pending.rollback(mark)
    assert pending.next_offset == 1 and pending.staged_count == 1
    assert pending.check(1, 0, 1, 1) == APPEND and pending.check(2, 0, 5, 1) == APPEND
    pending.commit([(0, 0)])
    assert set(bare.producers()) == {1}


def test_drain_on_a_real_log(env):
    plog, m = env.open(), manager(env)
    a0, a1, b0 = pframe(seq=0, n=2), pframe(seq=2, n=3), pframe(pid=9, seq=0, n=1)
    out = drain(plog, m, [[a0], [a1], [pframe(seq=9)], [b0], [pframe(seq=2, n=3)]])
    assert out[0] == [(0, 1)] and out[1] == [(2, 4)] and out[3] == [(5, 5)]
    assert isinstance(out[2], TierlogError)
    assert out[4] == [(2, 4)]  # retried inside the same drain: answered, not appended
    assert plog.log_end_offset == 6
    # A client retry after a timeout, in a later drain: original offsets, nothing appended.
    assert drain(plog, m, [[pframe(seq=0, n=2), pframe(seq=2, n=3)]]) == [[(0, 1), (2, 4)]]
    assert plog.log_end_offset == 6
    # A multi-frame request failing on its second frame leaves nothing of itself behind.
    out = drain(plog, m, [[pframe(seq=5, n=1), pframe(seq=99)], [pframe(seq=5, n=1)]])
    assert isinstance(out[0], TierlogError) and out[1] == [(6, 6)]
    assert m.entry(PID).last_seq == 5 and m.end_offset == plog.log_end_offset == 7


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
