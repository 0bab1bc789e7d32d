"""The history checker on hand-made histories: it passes a correct run and catches each kind
of violation (a checker that passes everything proves nothing)."""

from __future__ import annotations

import pytest

from tests.chaos.checker import allowed_losses, check
from tests.chaos.history import UNKNOWN_OFFSET, History, Kind, Row, value_of


def _history() -> History:
    h = History()
    h.producer("idem", Kind.IDEMPOTENT_ALL)
    h.producer("plain", Kind.PLAIN_ALL)
    h.producer("one", Kind.PLAIN_ONE)
    return h


def _log(*values: str) -> dict[int, list[Row]]:
    return {0: [Row(i, v.split("|")[1], v) for i, v in enumerate(values)]}


def _hw(final: dict[int, list[Row]]) -> dict[int, int]:
    return {p: len(rows) for p, rows in final.items()}


A0, A1, A2 = (value_of("idem", "a", n) for n in range(3))
P0, P1 = (value_of("plain", "b", n) for n in range(2))
O0, O1 = (value_of("one", "c", n) for n in range(2))


def _acked(h: History, final: dict[int, list[Row]]) -> None:
    for row in final[0]:
        producer, key, _ = row.value.split("|")  # type: ignore[union-attr]
        h.ack(producer, 0, row.offset, key, row.value or "")


def test_a_correct_history_passes() -> None:
    h = _history()
    final = _log(A0, P0, O0, A1, P1, O1, A2)
    _acked(h, final)
    for row in final[0]:
        h.read("c1", 0, row.offset, row.key, row.value)
    assert check(h, final, _hw(final)) == []


def test_a_lost_acks_all_record_is_caught() -> None:
    h = _history()
    final = _log(A0, A1)
    _acked(h, final)
    h.ack("idem", 0, 2, "a", A2)  # acknowledged, never in the log
    h.ack("plain", 0, 1, "b", P0)  # acknowledged where another record now is
    problems = check(h, final, _hw(final))
    assert any(A2 in p and "lost" in p for p in problems), problems
    assert any(P0 in p and "lost" in p for p in problems), problems


def test_a_duplicate_from_an_idempotent_producer_is_caught() -> None:
    h = _history()
    final = _log(A0, A1, A1)
    h.ack("idem", 0, 0, "a", A0)
    h.ack("idem", 0, 1, "a", A1)
    problems = check(h, final, _hw(final))
    assert any("duplicated" in p for p in problems), problems
    assert any("written 2 times" in p for p in problems), problems


def test_a_plain_producer_may_duplicate_on_retry() -> None:
    h = _history()
    final = _log(P0, P0, P1)
    h.ack("plain", 0, 1, "b", P0)
    h.ack("plain", 0, 2, "b", P1)
    assert check(h, final, _hw(final)) == []
    assert allowed_losses(h, final)["plain records duplicated"] == 1


def test_an_offset_gap_is_caught() -> None:
    h = _history()
    final = {0: [Row(0, "a", A0), Row(2, "a", A1)]}
    problems = check(h, final, {0: 3})
    assert any("offset 2 where 1 was due" in p for p in problems), problems
    problems = check(h, _log(A0), {0: 2})
    assert any("high watermark is 2" in p for p in problems), problems


def test_a_reorder_is_caught() -> None:
    h = _history()
    final = _log(A1, A0)
    _acked(h, final)
    problems = check(h, final, _hw(final))
    assert any(f"{A0} at offset 1 after {A1}" in p for p in problems), problems


def test_a_read_that_vanished_is_caught() -> None:
    h = _history()
    final = _log(A0, O1)
    h.read("c1", 0, 0, "a", A0)
    h.read("c1", 0, 1, "c", O0)  # read, then replaced by a failover
    h.read("c2", 0, 2, "c", O1)  # read, then truncated away
    problems = check(h, final, _hw(final))
    assert any("c1 read" in p and O0 in p for p in problems), problems
    assert any("c2 read" in p and "now holds nothing" in p for p in problems), problems


def test_a_consumer_that_skipped_an_offset_is_caught() -> None:
    h = _history()
    final = _log(A0, A1, A2)
    h.read("c1", 0, 0, "a", A0)
    h.read("c1", 0, 2, "a", A2)
    problems = check(h, final, _hw(final))
    assert any("skipped" in p for p in problems), problems


def test_acks_1_loss_is_allowed_only_across_a_failover() -> None:
    h = _history()
    final = _log(A0)
    h.epoch(0, 1)
    h.ack("one", 0, 1, "c", O0)
    problems = check(h, final, _hw(final))
    assert any(O0 in p and "lost" in p for p in problems), problems  # no failover seen
    h.epoch(0, 2)  # the leader changed after the acknowledgement
    assert check(h, final, _hw(final)) == []
    assert allowed_losses(h, final)["acks=1 lost in a failover"] == 1


@pytest.mark.parametrize("bad", [Row(1, "a", "garbage"), Row(1, "x", A1)])
def test_corrupt_or_foreign_records_are_caught(bad: Row) -> None:
    h = _history()
    final = {0: [Row(0, "a", A0), bad]}
    problems = check(h, final, _hw(final))
    assert any("offset 1" in p for p in problems), problems


def test_client_errors_fail_the_run() -> None:
    h = _history()
    h.error("idem: 409 OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert check(h, {0: []}, {0: 0}) == ["client saw: idem: 409 OUT_OF_ORDER_SEQUENCE_NUMBER"]


def test_an_acknowledgement_without_an_offset_needs_the_record_once() -> None:
    """librdkafka acknowledges a batch implicitly (no offset) when a later one succeeds after
    its answer was lost: the record must still be in the log, once for an idempotent one."""
    h = _history()
    final = _log(A0, A1)
    h.ack("idem", 0, UNKNOWN_OFFSET, "a", A0)
    assert check(h, final, _hw(final)) == []
    h.ack("idem", 0, UNKNOWN_OFFSET, "a", A2)  # never written
    assert any("lost" in p for p in check(h, final, _hw(final)))
    twice = _log(A0, A0)
    h2 = _history()
    h2.ack("idem", 0, UNKNOWN_OFFSET, "a", A0)
    assert any("written 2 times" in p for p in check(h2, twice, _hw(twice)))


def test_a_delivery_given_up_is_unacknowledged_until_the_cluster_is_healed() -> None:
    """A Kafka producer's record that timed out was never acknowledged: in the log or not,
    no violation (Kafka allows it). Sent once the faults are over, it must be delivered."""
    h = _history()
    final = _log(A0)  # A0 timed out but was written; A1 timed out and was not
    h.delivery_failed("idem", A0, sent=1.0, reason="_MSG_TIMED_OUT")
    h.delivery_failed("idem", A1, sent=2.0, reason="_MSG_TIMED_OUT")
    h.healed_at = 5.0
    assert check(h, final, _hw(final)) == []
    assert allowed_losses(h, final)["deliveries given up (unacknowledged)"] == 2
    h.delivery_failed("idem", A2, sent=6.0, reason="_MSG_TIMED_OUT")
    problems = check(h, final, _hw(final))
    assert len(problems) == 1 and A2 in problems[0] and "after the faults" in problems[0]


def test_an_unordered_producer_is_held_to_the_rest_only() -> None:
    """A plain librdkafka producer keeps no per-key order across leader changes: its
    reorders pass; its lost acknowledged records do not."""
    h = _history()
    h.unordered.add("plain")
    final = _log(P1, P0)
    _acked(h, final)
    assert check(h, final, _hw(final)) == []
    h.ack("plain", 0, 2, "b", value_of("plain", "b", 2))
    assert any("lost" in p for p in check(h, final, _hw(final)))
