"""Idempotent sequences per partition: stamped once, kept on retry, in order after errors."""

from __future__ import annotations

import time

from tierlog.client.batch import ProducerBatch
from tierlog.client.errors import ApiError
from tierlog.client.sequencer import MAX_SEQUENCE, Decision, Identity, PartitionSequencer
from tierlog.client.types import TopicPartition

TP = TopicPartition("t", 0)
ID1 = Identity(7, 0, 1)
ID2 = Identity(8, 0, 2)
TIMEOUT = ApiError("REQUEST_TIMED_OUT", "no answer")


def batch(n: int = 10) -> ProducerBatch:
    b = ProducerBatch(TP, deadline=time.monotonic() + 60)
    for i in range(n):
        b.try_append(None, b"v%d" % i, None, 0, 1, 1 << 30)
    b.closed = True
    return b


def out_of_order(expected: int) -> ApiError:
    return ApiError("OUT_OF_ORDER_SEQUENCE_NUMBER", "gap", 409, expected_sequence=expected)


def seq(max_in_flight: int = 5) -> PartitionSequencer:
    s = PartitionSequencer(max_in_flight, idempotent=True)
    s.adopt(ID1)
    return s


def test_sequences_count_records_and_the_first_batch_goes_alone() -> None:
    s = seq()
    a, b, c = batch(10), batch(3), batch(1)
    assert s.allowed_new() == 5
    s.send(a)
    assert (a.producer_id, a.producer_epoch, a.base_sequence) == (7, 0, 0)
    assert s.allowed_new() == 0  # nothing overtakes the first batch of a producer id
    s.on_success(a)
    assert s.allowed_new() == 5
    s.send(b)
    s.send(c)
    assert (b.base_sequence, c.base_sequence) == (10, 13)
    assert s.allowed_new() == 3
    assert s.next_sequence == 14


def test_max_in_flight_is_respected() -> None:
    s = seq(max_in_flight=2)
    first = batch()
    s.send(first)
    s.on_success(first)
    s.send(batch())
    s.send(batch())
    assert s.allowed_new() == 0


def test_a_retry_keeps_its_sequence_and_goes_before_new_batches() -> None:
    s = seq()
    a = batch()
    s.send(a)
    s.on_success(a)
    b, c = batch(), batch()
    s.send(b)
    s.send(c)
    assert s.on_error(b, TIMEOUT, can_retry=True, retry_at=5.0) is Decision.RETRY
    assert s.allowed_new() == 0  # retries first
    assert s.next_retry(now=10.0) is None  # c still in flight: retries go alone
    s.on_success(c)  # c appended: the leader must have b too
    assert s.next_retry(now=4.0) is None  # backoff not over
    again = s.next_retry(now=5.0)
    assert again is b and b.base_sequence == 10 and b.producer_id == 7
    s.on_success(b)
    assert s.allowed_new() == 5


def test_out_of_order_behind_an_unresolved_batch_is_retried_after_it() -> None:
    s = seq()
    a = batch()
    s.send(a)
    s.on_success(a)
    b, c = batch(), batch()
    s.send(b)
    s.send(c)
    # c overtook b on another connection: the leader wants b's sequence first.
    assert s.on_error(c, out_of_order(10), can_retry=True, retry_at=99.0) is Decision.RETRY
    assert c.unwritten
    assert s.next_retry(now=0.0) is None  # b still in flight
    s.on_success(b)
    assert s.next_retry(now=0.0) is c  # no backoff for this one
    assert c.base_sequence == 20


def test_out_of_order_behind_a_batch_answered_since_is_retried() -> None:
    """b is retried (e.g. after a 429), c goes out beside it and reaches the leader first;
    b's success is handled before c's OUT_OF_ORDER. c overtook b: resend it, do not fail."""
    s = seq()
    a = batch()
    s.send(a)
    s.on_success(a)
    b = batch()
    s.send(b)
    throttled = ApiError("THROTTLING_QUOTA_EXCEEDED", "slow down", 429)
    assert s.on_error(b, throttled, can_retry=True, retry_at=1.0) is Decision.RETRY
    assert s.next_retry(now=1.0) is b
    c = batch()
    s.send(c)  # a new batch beside the retry
    s.on_success(b)
    assert s.on_error(c, out_of_order(10), can_retry=True, retry_at=99.0) is Decision.RETRY
    assert not s.needs_reset
    assert s.next_retry(now=0.0) is c and c.base_sequence == 20


def test_out_of_order_at_the_head_fails_and_resets_the_producer_id() -> None:
    s = seq()
    a = batch()
    s.send(a)
    s.on_success(a)
    b, c = batch(), batch()
    s.send(b)
    s.send(c)
    # b is next in line, yet the leader expects another sequence: it lost our state.
    assert s.on_error(b, out_of_order(3), can_retry=True, retry_at=0.0) is Decision.FAIL
    assert s.needs_reset and not s.ready_to_reset()  # c is still in flight
    assert s.allowed_new() == 0
    # c comes back out of order too: proven unwritten, it is kept for the new id.
    assert s.on_error(c, out_of_order(3), can_retry=True, retry_at=0.0) is Decision.RETRY
    assert s.ready_to_reset()
    assert s.reset(ID2) == []
    assert s.identity == ID2
    resent = s.next_retry(now=0.0)
    assert resent is c and (c.producer_id, c.base_sequence) == (8, 0)


def test_reset_fails_batches_whose_outcome_is_unknown() -> None:
    s = seq()
    a = batch()
    s.send(a)
    s.on_success(a)
    b, c = batch(), batch()
    s.send(b)
    s.send(c)
    assert s.on_error(b, TIMEOUT, can_retry=False, retry_at=0.0) is Decision.FAIL  # gave up
    # c timed out too: it may be written, so resending it under a new id could duplicate it.
    assert s.on_error(c, TIMEOUT, can_retry=True, retry_at=0.0) is Decision.RETRY
    assert s.reset(ID2) == [c]
    assert s.idle and s.allowed_new() == 5 - 0 and s.next_sequence == 0


def test_an_error_for_a_batch_older_than_an_acknowledged_one_means_written() -> None:
    s = seq()
    a = batch()
    s.send(a)
    s.on_success(a)
    b, c = batch(), batch()
    s.send(b)
    s.send(c)
    s.on_success(c)
    # Retried, the leader would answer with its offsets; if that is no longer possible, or
    # the leader has forgotten it (out of order), it is known written all the same.
    assert s.on_error(b, TIMEOUT, can_retry=True, retry_at=0.0) is Decision.RETRY
    assert s.next_retry(now=0.0) is b
    assert s.on_error(b, out_of_order(40), can_retry=True, retry_at=0.0) is Decision.WRITTEN
    assert s.idle
    d = batch()
    s.send(d)
    s.send(e := batch())
    s.on_success(e)
    assert s.on_error(d, TIMEOUT, can_retry=False, retry_at=0.0) is Decision.WRITTEN


def test_non_retriable_errors_fail_at_once() -> None:
    s = seq()
    a = batch()
    s.send(a)
    too_big = ApiError("MESSAGE_TOO_LARGE", "no", 413)
    assert s.on_error(a, too_big, can_retry=True, retry_at=0.0) is Decision.FAIL
    assert s.needs_reset


def test_sequences_wrap_like_kafkas() -> None:
    s = seq()
    s.next_sequence = MAX_SEQUENCE - 1
    a, b = batch(3), batch(1)
    s.send(a)
    s.on_success(a)
    s.send(b)
    assert a.base_sequence == MAX_SEQUENCE - 1
    assert b.base_sequence == 1


def test_without_idempotence_nothing_is_stamped() -> None:
    s = PartitionSequencer(3, idempotent=False)
    a, b = batch(), batch()
    s.send(a)
    assert s.allowed_new() == 2  # no first-batch rule
    s.send(b)
    assert a.base_sequence == b.base_sequence == -1
    assert s.on_error(a, TIMEOUT, can_retry=True, retry_at=0.0) is Decision.RETRY
    assert s.on_error(b, ApiError("INVALID_RECORD", "x", 400), can_retry=True, retry_at=0.0) is (
        Decision.FAIL
    )
    assert not s.needs_reset
