"""The transaction store's hot path in statements (metadata/transactions.py): the steps every
transaction takes are one statement each, committed on its own (no BEGIN, SELECT ... FOR
UPDATE, COMMIT round trips), and such a statement still serializes with a concurrent
state change of the row as the locked path does."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, text, update
from sqlalchemy.engine import Engine

from metadata.transactions import Span, TxnRepo
from metadata.txn_engine import APPLICATION_NAME, unpinged
from metadata.txn_rows import (
    COMPLETE_COMMIT,
    PREPARE_COMMIT,
    Initialized,
    TxnError,
    kafka_transactions,
)
from metadata.txn_spans import Closed, Completed, NewSpans


def _init(repo: TxnRepo, tid: str, ids: Iterator[int]) -> tuple[int, int]:
    got = repo.init(tid, 60_000, lambda: next(ids))
    assert isinstance(got, Initialized)
    return got.producer_id, got.producer_epoch


@contextmanager
def _statements(engine: Engine) -> Iterator[list[tuple[str, bool]]]:
    """(verb, one round trip) of every statement sent in the block on the engine or its
    unpinged sibling (metadata/txn_engine.py): one autocommitted on a connection handed out
    without a pre-ping is a single round trip (psycopg sends no BEGIN and no COMMIT for it,
    and the pool no ping before it)."""
    seen: list[tuple[str, bool]] = []

    def recorder(single: bool) -> Callable[..., None]:
        def record(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
            autocommit = bool(cursor.connection.autocommit)
            seen.append((statement.split(None, 1)[0].upper(), single and autocommit))

        return record

    watched = [(engine, recorder(False)), (unpinged(engine), recorder(True))]
    for target, record in watched:
        event.listen(target, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        for target, record in watched:
            event.remove(target, "before_cursor_execute", record)


def test_each_step_every_transaction_takes_is_one_statement(db_engine: Engine) -> None:
    repo, ids = TxnRepo(db_engine), itertools.count(7)
    pid, epoch = _init(repo, "hot", ids)
    for commit in (True, False):  # two transactions: the second starts from a completed one
        with _statements(db_engine) as added:
            assert repo.add_partitions("hot", pid, epoch, [("a", 0), ("a", 1), ("a", 0)]) == (
                ("a", 0),
                ("a", 1),
            )
        with _statements(db_engine) as checked:
            rows = repo.by_producers([pid])
        assert rows[pid].partitions == (("a", 0), ("a", 1))
        with _statements(db_engine) as recorded:
            repo.add_spans("a", 0, [Span(10, 19, pid, "ongoing"), Span(30, 39, pid, "ongoing")])
        with _statements(db_engine) as ended:
            prepared = repo.end("hot", pid, epoch, commit)
        assert prepared is not None and prepared.partitions == (("a", 0), ("a", 1))
        with _statements(db_engine) as finished:
            repo.finish(prepared)
        with _statements(db_engine) as closed:
            repo.write_spans([], [Closed("a", 0, pid, commit, 40 + commit)])
        for step in (added, checked, recorded, ended, finished):
            assert len(step) == 1 and step[0][1], step
        assert len(closed) == (1 if commit else 2) and closed[0][1] is commit  # aborts: rare
    row = repo.get("hot")
    assert row is not None and row.state == "CompleteAbort" and row.partitions == ()
    assert repo.spans("a", 0) == [
        Span(10, 19, pid, "aborted"),  # the second transaction's (the first's committed)
        Span(30, 39, pid, "aborted"),
        Span(40, 40, pid, "marker"),
        Span(41, 41, pid, "marker"),
    ]


def test_a_commit_closes_its_spans_and_writes_the_others_in_one_statement(
    db_engine: Engine,
) -> None:
    """A commit's marker, another producer's new span, and a stale ongoing span at the
    marker's offset (left by a leader whose records there were truncated) in one call: the
    producer's spans become data, the stale one becomes the marker, the new one stays."""
    repo = TxnRepo(db_engine)
    repo.add_spans("c", 0, [Span(0, 4, 1, "ongoing"), Span(9, 9, 1, "ongoing")])
    repo.add_spans("c", 1, [Span(0, 2, 1, "ongoing")])
    with _statements(db_engine) as seen:
        repo.write_spans(
            [NewSpans("c", 0, (Span(5, 8, 2, "ongoing"),))], [Closed("c", 0, 1, True, 9)]
        )
    assert len(seen) == 1 and seen[0][1]
    assert repo.spans("c", 0) == [Span(5, 8, 2, "ongoing"), Span(9, 9, 1, "marker")]
    assert repo.spans("c", 1) == [Span(0, 2, 1, "ongoing")]  # another partition's: kept


def _waiting_on_a_lock(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
            ).scalar()
        )


def test_a_one_statement_step_waits_for_a_concurrent_change_and_sees_it(
    db_engine: Engine,
) -> None:
    """Another broker fences the producer (InitProducerId: the epoch bumped under the row
    lock) while EndTxn runs here: EndTxn waits for the lock, then finds itself fenced, as
    on the locked path; it never prepares a commit for an epoch that is gone."""
    repo, ids = TxnRepo(db_engine), itertools.count(50)
    pid, epoch = _init(repo, "race", ids)
    repo.add_partitions("race", pid, epoch, [("r", 0)])
    outcome: list[object] = []
    t = kafka_transactions.c
    with db_engine.begin() as other:
        other.execute(
            update(kafka_transactions)
            .where(t.transactional_id == "race")
            .values(producer_epoch=epoch + 1, state="Empty")
        )

        def end() -> None:
            try:
                outcome.append(repo.end("race", pid, epoch, True))
            except TxnError as exc:
                outcome.append(exc.kafka_name)

        ender = threading.Thread(target=end, daemon=True)
        ender.start()
        deadline = time.monotonic() + 30
        while not _waiting_on_a_lock(db_engine):
            assert time.monotonic() < deadline, "EndTxn never waited for the row lock"
            assert ender.is_alive(), f"EndTxn did not wait for the row lock: {outcome}"
            time.sleep(0.01)
    ender.join(30)
    assert outcome == ["PRODUCER_FENCED"]
    row = repo.get("race")
    assert row is not None and (row.producer_epoch, row.state) == (epoch + 1, "Empty")


def test_finish_leaves_a_row_another_broker_moved_on(db_engine: Engine) -> None:
    """finish() of a completion that lost a race (the row already completed and a new
    transaction began on it) changes nothing."""
    repo, ids = TxnRepo(db_engine), itertools.count(90)
    pid, epoch = _init(repo, "late", ids)
    repo.add_partitions("late", pid, epoch, [("l", 0)])
    prepared = repo.end("late", pid, epoch, True)
    assert prepared is not None and prepared.state == PREPARE_COMMIT
    repo.finish(prepared)
    done = repo.get("late")
    assert done is not None and done.state == COMPLETE_COMMIT
    repo.add_partitions("late", pid, epoch, [("l", 1)])  # the next transaction
    repo.finish(prepared)  # the same completion again, late
    row = repo.get("late")
    assert row is not None and row.state == "Ongoing" and row.partitions == (("l", 1),)


def test_markers_spans_and_the_completion_are_one_statement(db_engine: Engine) -> None:
    """A commit's markers' spans and its row's Complete* in one statement (the coordinator's
    completion when it leads the partitions); a late one, whose row moved on, changes no
    row."""
    repo, ids = TxnRepo(db_engine), itertools.count(120)
    pid, epoch = _init(repo, "one", ids)
    repo.add_partitions("one", pid, epoch, [("o", 0), ("o", 1)])
    repo.add_spans("o", 0, [Span(0, 9, pid, "ongoing")])
    prepared = repo.end("one", pid, epoch, True)
    assert prepared is not None
    done = Completed("one", pid, PREPARE_COMMIT, COMPLETE_COMMIT)
    with _statements(db_engine) as seen:
        repo.write_spans([], [Closed("o", 0, pid, True, 10), Closed("o", 1, pid, True, 0)], [done])
    assert len(seen) == 1 and seen[0][1], seen
    row = repo.get("one")
    assert row is not None and (row.state, row.partitions) == (COMPLETE_COMMIT, ())
    assert repo.spans("o", 0) == [Span(10, 10, pid, "marker")]
    repo.add_partitions("one", pid, epoch, [("o", 1)])  # the next transaction began
    repo.write_spans([], [], [done])  # the same completion again, late
    row = repo.get("one")
    assert row is not None and (row.state, row.partitions) == ("Ongoing", (("o", 1),))


def _terminate_backends(engine: Engine, application_name: str) -> int:
    """Postgres ends this database's connections of `application_name` (as a restart ends
    them all); returned once they are gone: how many there were."""
    mine = "datname = current_database() AND application_name = :app"
    # Autocommit: pg_stat_activity is read afresh by each statement, not once per transaction.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        pids = conn.execute(
            text(f"SELECT pid FROM pg_stat_activity WHERE {mine}"), {"app": application_name}
        ).scalars()
        ended = [int(pid) for pid in pids]
        for pid in ended:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        deadline = time.monotonic() + 30
        while conn.execute(
            text("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:pids)"), {"pids": ended}
        ).scalar():
            assert time.monotonic() < deadline, "Postgres never ended the backends"
            time.sleep(0.01)
    return len(ended)


def test_the_hot_path_pings_nothing_and_outlives_a_dead_connection(
    db_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The steps every transaction takes run on connections handed out without a pre-ping
    (it was a round trip before each); one found dead (its backend ended, as by a Postgres
    restart) is replaced and the statement runs again on a new connection: the caller
    never hears of it."""
    repo, ids = TxnRepo(db_engine), itertools.count(150)
    pid, epoch = _init(repo, "dead", ids)
    pings: list[object] = []
    monkeypatch.setattr(unpinged(db_engine).dialect, "do_ping", pings.append)
    repo.add_partitions("dead", pid, epoch, [("d", 0)])  # leaves its connection pooled
    assert _terminate_backends(db_engine, APPLICATION_NAME) >= 1
    prepared = repo.end("dead", pid, epoch, True)  # its pooled connection is dead
    assert prepared is not None and prepared.state == PREPARE_COMMIT
    assert repo.by_producers([pid])[pid].state == PREPARE_COMMIT
    assert pings == []


def test_add_offsets_is_one_statement_and_keeps_a_groups_pending_offsets(
    db_engine: Engine,
) -> None:
    """AddOffsetsToTxn (a consume-transform-produce loop's, every transaction) starts the
    transaction or joins the one under way in one statement; a group added again keeps the
    offsets TxnOffsetCommit left with it, and the transaction's partitions stay; an ending
    transaction or a fenced epoch still get Kafka's errors."""
    repo, ids = TxnRepo(db_engine), itertools.count(170)
    pid, epoch = _init(repo, "eos", ids)
    with _statements(db_engine) as started:
        repo.add_offsets("eos", pid, epoch, "g")  # the transaction's first call
    row = repo.get("eos")
    assert row is not None and (row.state, row.partitions) == ("Ongoing", ())
    assert row.started_at is not None
    repo.add_partitions("eos", pid, epoch, [("e", 0)])
    repo.txn_offsets("eos", pid, epoch, "g", ("m", 2), [("in", 0, 41, None)])
    with _statements(db_engine) as joined:
        repo.add_offsets("eos", pid, epoch, "g")  # again: its offsets stay
        repo.add_offsets("eos", pid, epoch, "h")
    assert len(started) == 1 and len(joined) == 2, (started, joined)
    assert all(single for _, single in started + joined), (started, joined)
    row = repo.get("eos")
    assert row is not None and row.partitions == (("e", 0),) and row.started_at is not None
    assert row.offsets["g"] == {"member": "m", "generation": 2, "entries": [["in", 0, 41, None]]}
    assert row.offsets["h"] == {"member": "", "generation": -1, "entries": []}
    with pytest.raises(TxnError) as fenced:
        repo.add_offsets("eos", pid, epoch - 1, "g")
    assert fenced.value.kafka_name == "PRODUCER_FENCED"
    repo.end("eos", pid, epoch, True)
    with pytest.raises(TxnError) as ending:
        repo.add_offsets("eos", pid, epoch, "g")
    assert ending.value.kafka_name == "CONCURRENT_TRANSACTIONS"


def test_txn_offset_commit_is_one_statement_and_merges_by_partition(db_engine: Engine) -> None:
    """TxnOffsetCommit keeps its offsets with the group in one statement: a partition named
    again gets its new offset, the others stay, member and generation are the last
    request's; without AddOffsetsToTxn, or fenced, Kafka's errors as before."""
    repo, ids = TxnRepo(db_engine), itertools.count(190)
    pid, epoch = _init(repo, "toc", ids)
    repo.add_offsets("toc", pid, epoch, "g")
    repo.add_offsets("toc", pid, epoch, "other")
    with _statements(db_engine) as seen:
        repo.txn_offsets("toc", pid, epoch, "g", ("m", 1), [("a", 0, 5, None), ("a", 1, 7, "x")])
        repo.txn_offsets("toc", pid, epoch, "g", ("m", 2), [("a", 1, 9, "y"), ("b", 0, 3, None)])
    assert len(seen) == 2 and all(single for _, single in seen), seen
    row = repo.get("toc")
    assert row is not None
    pending = row.offsets["g"]
    assert (pending["member"], pending["generation"]) == ("m", 2)
    assert sorted(map(tuple, pending["entries"])) == [
        ("a", 0, 5, None),
        ("a", 1, 9, "y"),
        ("b", 0, 3, None),
    ]
    assert row.offsets["other"] == {"member": "", "generation": -1, "entries": []}
    with pytest.raises(TxnError) as unadded:
        repo.txn_offsets("toc", pid, epoch, "never", ("m", 2), [("a", 0, 1, None)])
    assert unadded.value.kafka_name == "INVALID_TXN_STATE"
    with pytest.raises(TxnError) as fenced:
        repo.txn_offsets("toc", pid, epoch + 1, "g", ("m", 2), [("a", 0, 1, None)])
    assert fenced.value.kafka_name == "PRODUCER_FENCED"
    prepared = repo.end("toc", pid, epoch, True)
    assert prepared is not None and len(prepared.offsets["g"]["entries"]) == 3
