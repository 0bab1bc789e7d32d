"""Idempotent-producer state: validation and staging within a drain (persistence and rebuild
are in test_ingest_producer_recovery.py).

Pure checks run on the manager alone; drains use a real LocalLog and a real rocksdict index in
tmp_path (the `env` fixture of conftest.py).
"""

from __future__ import annotations

import pytest

from ingest.unified.producer_state import (
    APPEND,
    MAX_SEQUENCE,
    PendingAppends,
    Verdict,
    add_seq,
)
from logformat.errors import ErrorCode, TierlogError
from tests.unit.ingest.producer_frames import PID, drain, manager, pframe


def code(exc: pytest.ExceptionInfo[TierlogError]) -> ErrorCode:
    return exc.value.code


# --- validation (pure) ---


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
