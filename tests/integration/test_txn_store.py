"""The transaction coordinator's state in Postgres (metadata/transactions.py): Kafka's
TransactionMetadata transitions, the fencing each one does, and the partitions' spans."""

from __future__ import annotations

import itertools
import time
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from metadata.transactions import Span, TxnRepo
from metadata.txn_rows import (
    COMPLETE_COMMIT,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    Initialized,
    TxnError,
)
from metadata.txn_spans import Closed, NewSpans


def _kafka_name(call: object, *args: object) -> str:
    assert callable(call)
    with pytest.raises(TxnError) as info:
        call(*args)
    return info.value.kafka_name


def test_a_transaction_from_init_to_commit_and_its_retries(db_engine: Engine) -> None:
    repo, ids = TxnRepo(db_engine), itertools.count(100)
    assert repo.init("t", 60_000, lambda: next(ids)) == Initialized(100, 0)
    assert repo.init("t", 60_000, lambda: next(ids)) == Initialized(100, 1)  # fences epoch 0
    assert _kafka_name(repo.add_partitions, "t", 100, 0, [("a", 0)]) == "PRODUCER_FENCED"
    assert _kafka_name(repo.end, "t", 100, 1, True) == "INVALID_TXN_STATE"  # nothing under way
    assert _kafka_name(repo.end, "nobody", 100, 1, True) == "INVALID_PRODUCER_ID_MAPPING"
    repo.add_partitions("t", 100, 1, [("a", 0), ("b", 1)])
    repo.add_partitions("t", 100, 1, [("a", 0)])  # once each
    repo.add_offsets("t", 100, 1, "g")
    repo.txn_offsets("t", 100, 1, "g", ("m", 3), [("a", 0, 42, None)])
    row = repo.get("t")
    assert row is not None and row.state == ONGOING and row.partitions == (("a", 0), ("b", 1))
    prepared = repo.end("t", 100, 1, True)
    assert prepared is not None and prepared.state == PREPARE_COMMIT
    assert prepared.offsets["g"]["entries"] == [["a", 0, 42, None]]
    assert _kafka_name(repo.add_partitions, "t", 100, 1, [("c", 0)]) == "CONCURRENT_TRANSACTIONS"
    again = repo.end("t", 100, 1, True)  # a retry while completing: complete it again
    assert again is not None and again[:7] == prepared[:7]
    repo.finish(prepared)
    done = repo.get("t")
    assert done is not None and (done.state, done.partitions) == (COMPLETE_COMMIT, ())
    assert repo.end("t", 100, 1, True) is None  # a retry once completed
    assert _kafka_name(repo.end, "t", 100, 1, False) == "INVALID_TXN_STATE"  # other outcome
    assert [r.transactional_id for r in repo.list()] == ["t"]


def test_init_aborts_an_open_transaction_and_timeouts_fence(db_engine: Engine) -> None:
    repo, ids = TxnRepo(db_engine), itertools.count(7)
    repo.init("t", 60_000, lambda: next(ids))
    repo.add_partitions("t", 7, 0, [("a", 0)])
    pending = repo.init("t", 60_000, lambda: next(ids))  # the zombie's transaction first
    assert not isinstance(pending, Initialized)
    assert (pending.state, pending.producer_epoch) == (PREPARE_ABORT, 1)
    repo.finish(pending)
    assert repo.init("t", 50, lambda: next(ids)) == Initialized(7, 2)
    repo.add_partitions("t", 7, 2, [("a", 0)])
    time.sleep(0.1)  # past the 50 ms timeout (the sweeper's view of it)
    assert [r.transactional_id for r in repo.due(timedelta(hours=1))] == ["t"]
    aborted = repo.abort_if_expired("t")
    assert aborted is not None and (aborted.state, aborted.producer_epoch) == (PREPARE_ABORT, 3)
    assert _kafka_name(repo.end, "t", 7, 2, True) == "PRODUCER_FENCED"  # commit after timeout


def test_spans_become_aborted_or_vanish_with_their_marker(db_engine: Engine) -> None:
    repo = TxnRepo(db_engine)
    repo.add_span("a", 0, 5, 0, 9)
    repo.add_span("a", 0, 6, 10, 12)
    repo.add_span("a", 0, 5, 13, 14)
    repo.close_spans("a", 0, 5, False, 15)
    repo.close_spans("a", 0, 6, True, 16)
    assert repo.spans("a", 0) == [
        Span(0, 9, 5, "aborted"),
        Span(13, 14, 5, "aborted"),
        Span(15, 15, 5, "marker"),
        Span(16, 16, 6, "marker"),
    ]
    repo.drop_spans_from("a", 0, 15)  # a new leader's log ends at 15
    assert [s.first_offset for s in repo.spans("a", 0)] == [0, 13]


def test_ended_spans_below_the_log_start_are_pruned(db_engine: Engine) -> None:
    repo = TxnRepo(db_engine)
    repo.add_spans(
        "p",
        0,
        [
            Span(0, 4, 5, "aborted"),
            Span(5, 5, 5, "marker"),
            Span(6, 9, 6, "aborted"),
            Span(10, 10, 6, "marker"),
        ],
    )
    repo.add_span("p", 0, 7, 3, 3)  # still open: kept whatever the log start
    repo.add_span("p", 1, 8, 0, 0)  # another partition
    assert repo.prune_spans_below("p", 0, 7) == 2  # 6..9 straddles the start: kept
    assert repo.spans("p", 0) == [
        Span(3, 3, 7, "ongoing"),
        Span(6, 9, 6, "aborted"),
        Span(10, 10, 6, "marker"),
    ]
    # all below the start: the newest marker stays, so reads still look for marker rows
    assert repo.prune_spans_below("p", 0, 20) == 1
    assert repo.spans("p", 0) == [Span(3, 3, 7, "ongoing"), Span(10, 10, 6, "marker")]
    assert repo.spans("p", 1) == [Span(0, 0, 8, "ongoing")]


def test_many_partitions_span_changes_in_one_call(db_engine: Engine) -> None:
    repo = TxnRepo(db_engine)
    repo.add_spans("m", 0, [Span(0, 4, 5, "ongoing"), Span(5, 6, 9, "ongoing")])
    repo.add_spans("m", 1, [Span(0, 2, 5, "ongoing")])
    repo.write_spans(
        [
            NewSpans("m", 2, (Span(0, 3, 5, "ongoing"),)),
            NewSpans("m", 0, (Span(5, 6, 9, "ongoing"), Span(5, 8, 9, "ongoing"))),  # last wins
            NewSpans("m", 1, (Span(0, 2, 5, "aborted"),)),  # an abort's own spans, again
        ],
        [Closed("m", 0, 5, True, 9), Closed("m", 1, 5, False, 3)],
    )
    assert repo.spans("m", 0) == [Span(5, 8, 9, "ongoing"), Span(9, 9, 5, "marker")]
    assert repo.spans("m", 1) == [Span(0, 2, 5, "aborted"), Span(3, 3, 5, "marker")]
    assert repo.spans("m", 2) == [Span(0, 3, 5, "ongoing")]
    assert repo.by_producers([5, 9, 404]) == {}  # spans name producers; rows are by id
