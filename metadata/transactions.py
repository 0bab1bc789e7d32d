"""Kafka transactions in Postgres (migration 0014_transactions): the coordinator's state per
transactional id and each partition's transaction spans (docs/kafka-apis.md, Transactions).

Every state change locks its row (SELECT ... FOR UPDATE), so any broker may act as the
coordinator of any transactional id: a broker that dies mid-commit leaves the row in
PrepareCommit, and whichever broker looks next (the client's retry, or the sweeper every
broker runs) writes the markers again and completes it. Errors carry Kafka's error name.
The steps every transaction takes (its first AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit (txn_offsets.py), EndTxn, the completion) are first tried as one
conditional UPDATE committed on its own (the row lock it takes is the same): a round trip
instead of five (the pool's ping, BEGIN, SELECT ... FOR UPDATE, UPDATE, COMMIT); only when
its condition fails does the locked path run, to answer retries and errors. Those
statements run on connections not pinged first (metadata/txn_engine.py).

Read API for the admin APIs (ListTransactions / DescribeTransactions): `TxnRepo.list()`
and `TxnRepo.get(transactional_id)`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from sqlalchemy import (
    and_,
    case,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection, Engine

from metadata.db import single_statements
from metadata.txn_engine import autocommitted
from metadata.txn_offsets import keep_offsets
from metadata.txn_rows import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ENDED,
    MAX_EPOCH,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARING,
    Initialized,
    TxnError,
    TxnRow,
    expired,
    kafka_transactions,
    matching,
    now_utc,
    row_of,
)
from metadata.txn_spans import Span as Span  # re-exported: the store's callers name it here
from metadata.txn_spans import TxnSpans


class TxnRepo(TxnSpans):
    """The coordinator's state per transactional id, and (TxnSpans) each partition's spans."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._polls = single_statements(engine)  # every broker looks for due transactions

    # -- reading (also the admin APIs' read API) ---------------------------------------------

    def get(self, tid: str) -> TxnRow | None:
        with self.engine.connect() as conn:
            r = conn.execute(
                select(kafka_transactions).where(kafka_transactions.c.transactional_id == tid)
            ).one_or_none()
        return None if r is None else row_of(r)

    def list(self) -> builtins.list[TxnRow]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(kafka_transactions).order_by(kafka_transactions.c.transactional_id)
            ).all()
        return [row_of(r) for r in rows]

    def by_producer(self, pid: int) -> TxnRow | None:
        return self.by_producers([pid]).get(pid)

    def by_producers(self, pids: Iterable[int]) -> dict[int, TxnRow]:
        """The rows of these producer ids (one query for all): a leader checks the
        transactional batches of a produce request's partitions at once."""
        query = select(kafka_transactions).where(kafka_transactions.c.producer_id.in_(set(pids)))
        rows = autocommitted(self.hot, lambda conn: conn.execute(query).all())
        return {row.producer_id: row for row in map(row_of, rows)}

    # -- the coordinator's state changes --------------------------------------------------------

    @staticmethod
    def _lock(conn: Connection, tid: str) -> TxnRow | None:
        r = conn.execute(
            select(kafka_transactions)
            .where(kafka_transactions.c.transactional_id == tid)
            .with_for_update()
        ).one_or_none()
        return None if r is None else row_of(r)

    def _advance(
        self, tid: str, pid: int, epoch: int, states: Iterable[str], **values: Any
    ) -> TxnRow | None:
        """The row of (tid, pid, epoch) set to `values` in one statement if it is in one of
        `states`, or None (nothing changed: the caller takes the locked path)."""
        t = kafka_transactions.c
        statement = (
            update(kafka_transactions)
            .where(
                t.transactional_id == tid,
                t.producer_id == pid,
                t.producer_epoch == epoch,
                t.state.in_(list(states)),
            )
            .values(updated_at=now_utc(), **values)
            .returning(*kafka_transactions.c)
        )
        r = autocommitted(self.hot, lambda conn: conn.execute(statement).one_or_none())
        return None if r is None else row_of(r)

    @staticmethod
    def _set(conn: Connection, tid: str, **values: Any) -> None:
        conn.execute(
            update(kafka_transactions)
            .where(kafka_transactions.c.transactional_id == tid)
            .values(updated_at=now_utc(), **values)
        )

    def init(self, tid: str, timeout_ms: int, allocate: Callable[[], int]) -> Initialized | TxnRow:
        """InitProducerId: the id and its next epoch (fencing every older one), or the row of
        a transaction that must be completed first (an ongoing one is aborted: its epoch is
        bumped now, so its producer is fenced before the markers are written)."""
        with self.engine.begin() as conn:
            row = self._lock(conn, tid)
            if row is None:
                pid = allocate()
                conn.execute(
                    insert(kafka_transactions).values(
                        transactional_id=tid,
                        producer_id=pid,
                        producer_epoch=0,
                        state=EMPTY,
                        timeout_ms=timeout_ms,
                        partitions=[],
                        offsets={},
                    )
                )
                return Initialized(pid, 0)
            if row.state == ONGOING:
                self._set(conn, tid, state=PREPARE_ABORT, producer_epoch=row.producer_epoch + 1)
                return row._replace(state=PREPARE_ABORT, producer_epoch=row.producer_epoch + 1)
            if row.state in PREPARING:
                return row
            pid, epoch = row.producer_id, row.producer_epoch + 1
            if epoch > MAX_EPOCH:  # exhausted: a new id, as Kafka does
                pid, epoch = allocate(), 0
            self._set(
                conn,
                tid,
                producer_id=pid,
                producer_epoch=epoch,
                state=EMPTY,
                timeout_ms=timeout_ms,
                started_at=None,
                partitions=[],
                offsets={},
            )
            return Initialized(pid, epoch)

    def has_partitions(
        self, tid: str, pid: int, epoch: int, parts: Iterable[tuple[str, int]]
    ) -> bool:
        """Whether producer (pid, epoch)'s transaction under way has all of `parts` already:
        a read, without the row lock or a write (an AddPartitionsToTxn repeat)."""
        row = self.get(tid)
        return (
            row is not None
            and (row.producer_id, row.producer_epoch, row.state) == (pid, epoch, ONGOING)
            and set(parts) <= set(row.partitions)
        )

    def add_partitions(
        self, tid: str, pid: int, epoch: int, parts: Iterable[tuple[str, int]]
    ) -> tuple[tuple[str, int], ...]:
        """AddPartitionsToTxn: every partition of the transaction under way, these included."""
        parts = list(dict.fromkeys(parts))
        started = self._start(tid, pid, epoch, parts)
        if started is not None:
            return started.partitions
        return self._add_locked(tid, pid, epoch, parts)

    def add_new_partitions(
        self, tid: str, pid: int, epoch: int, parts: Iterable[tuple[str, int]]
    ) -> None:
        """AddPartitionsToTxn as the coordinator takes it, in as few round trips as each
        case allows: a transaction's first call starts it in one statement; a repeat (the
        transaction under way has them all) is answered after one read, without the row lock
        or a write (Kafka's coordinator does not write its log for them either); the rest
        take the locked path."""
        parts = list(dict.fromkeys(parts))
        if self._start(tid, pid, epoch, parts) is not None:
            return
        if not self.has_partitions(tid, pid, epoch, parts):
            self._add_locked(tid, pid, epoch, parts)

    def _start(
        self, tid: str, pid: int, epoch: int, parts: builtins.list[tuple[str, int]]
    ) -> TxnRow | None:
        """The transaction's first call starts it (one statement), or None: not ended."""
        first = [list(tp) for tp in parts]
        return self._advance(
            tid,
            pid,
            epoch,
            ENDED,
            state=ONGOING,
            started_at=now_utc(),
            partitions=first,
            offsets={},
        )

    def _add_locked(
        self, tid: str, pid: int, epoch: int, parts: builtins.list[tuple[str, int]]
    ) -> tuple[tuple[str, int], ...]:
        with self.engine.begin() as conn:
            row = matching(self._lock(conn, tid), tid, pid, epoch)
            known = list(row.partitions) if row.state == ONGOING else []
            for tp in parts:
                if tp not in known:
                    known.append(tp)
            self._begin(conn, row, partitions=[list(tp) for tp in known])
        return tuple(known)

    def _begin(self, conn: Connection, row: TxnRow, **values: Any) -> None:
        if row.state != ONGOING:  # the first partition or group starts the transaction
            values.setdefault("partitions", [])
            values.setdefault("offsets", {})
            self._set(conn, row.transactional_id, state=ONGOING, started_at=now_utc(), **values)
        else:
            self._set(conn, row.transactional_id, **values)

    def add_offsets(self, tid: str, pid: int, epoch: int, group: str) -> None:
        """AddOffsetsToTxn: the group joins the transaction under way (which it starts if
        none is), its pending offsets kept if it joined already. One statement (a
        consume-transform-produce loop sends it every transaction); the locked path only
        for what it refuses."""
        t = kafka_transactions.c
        ongoing = t.state == ONGOING
        joined = literal({group: {"member": "", "generation": -1, "entries": []}}, JSONB)
        kept = case((ongoing, t.offsets), else_=literal({}, JSONB))
        changed = self._advance(
            tid,
            pid,
            epoch,
            (ONGOING, *ENDED),
            state=ONGOING,
            started_at=case((ongoing, t.started_at), else_=literal(now_utc(), t.started_at.type)),
            partitions=case((ongoing, t.partitions), else_=literal([], JSONB)),
            offsets=joined.op("||", return_type=JSONB)(kept),  # the right side's keys win
        )
        if changed is not None:
            return
        with self.engine.begin() as conn:
            row = matching(self._lock(conn, tid), tid, pid, epoch)
            offsets = dict(row.offsets) if row.state == ONGOING else {}
            offsets.setdefault(group, {"member": "", "generation": -1, "entries": []})
            self._begin(conn, row, offsets=offsets)

    def txn_offsets(
        self,
        tid: str,
        pid: int,
        epoch: int,
        group: str,
        member: tuple[str, int],
        entries: Iterable[tuple[str, int, int, str | None]],
    ) -> None:
        """TxnOffsetCommit: the offsets are kept with the transaction, applied at commit. In
        one statement (txn_offsets.py); the locked path only for what it refuses."""
        entries = list(entries)
        if keep_offsets(self.hot, (tid, pid, epoch), group, member, entries):
            return
        with self.engine.begin() as conn:
            row = matching(self._lock(conn, tid), tid, pid, epoch)
            if row.state != ONGOING or group not in row.offsets:
                raise TxnError(
                    "INVALID_TXN_STATE",
                    f"group {group!r} was not added to the transaction of {tid!r} "
                    "(AddOffsetsToTxn first)",
                )
            pending = dict(row.offsets[group])
            merged = {(e[0], e[1]): e for e in pending.get("entries", [])}
            for t, p, offset, meta in entries:
                merged[(t, p)] = [t, p, offset, meta]
            pending.update(member=member[0], generation=member[1], entries=list(merged.values()))
            self._set(conn, tid, offsets={**row.offsets, group: pending})

    def end(self, tid: str, pid: int, epoch: int, commit: bool) -> TxnRow | None:
        """EndTxn: the row to complete (now PrepareCommit/PrepareAbort), or None when the
        transaction already ended this way (a retried EndTxn)."""
        wanted = PREPARE_COMMIT if commit else PREPARE_ABORT
        done = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        prepared = self._advance(tid, pid, epoch, (ONGOING,), state=wanted)
        if prepared is not None:
            return prepared
        with self.engine.begin() as conn:
            row = self._lock(conn, tid)
            same = row is not None and (row.producer_id, row.producer_epoch) == (pid, epoch)
            if same and row is not None and row.state == wanted:
                return row  # a retry while it completes: complete it (again)
            if same and row is not None and row.state == done:
                return None  # a retry once it completed
            row = matching(row, tid, pid, epoch)
            if row.state != ONGOING:
                raise TxnError(
                    "INVALID_TXN_STATE",
                    f"no transaction of {tid!r} is under way (state {row.state}): "
                    f"nothing to {'commit' if commit else 'abort'}",
                )
            self._set(conn, tid, state=wanted)
            return row._replace(state=wanted)

    def finish(self, row: TxnRow) -> None:
        """The markers are written: Complete*, and the row is ready for the next one."""
        done = COMPLETE_COMMIT if row.state == PREPARE_COMMIT else COMPLETE_ABORT
        t = kafka_transactions.c
        statement = (  # unless another broker finished it
            update(kafka_transactions)
            .where(
                t.transactional_id == row.transactional_id,
                t.state == row.state,
                t.producer_id == row.producer_id,
            )
            .values(updated_at=now_utc(), state=done, started_at=None, partitions=[], offsets={})
        )
        autocommitted(self.hot, lambda conn: conn.execute(statement))

    def abort_if_expired(self, tid: str) -> TxnRow | None:
        """The sweeper's abort of a transaction past its timeout: PrepareAbort with the
        epoch bumped (its producer is fenced, as Kafka fences it), or None."""
        with self.engine.begin() as conn:
            row = self._lock(conn, tid)
            if row is None or row.state != ONGOING or row.started_at is None:
                return None
            if row.started_at + timedelta(milliseconds=row.timeout_ms) > now_utc():
                return None
            self._set(conn, tid, state=PREPARE_ABORT, producer_epoch=row.producer_epoch + 1)
            return row._replace(state=PREPARE_ABORT, producer_epoch=row.producer_epoch + 1)

    def due(self, stuck_after: timedelta) -> builtins.list[TxnRow]:
        """Transactions past their timeout, and ones left preparing longer than
        `stuck_after` (their coordinator died while writing markers)."""
        t = kafka_transactions.c
        now = now_utc()
        with self._polls.connect() as conn:
            rows = conn.execute(
                select(kafka_transactions).where(
                    and_(t.state == ONGOING, t.started_at.is_not(None))
                    | (t.state.in_(PREPARING) & (t.updated_at < now - stuck_after))
                )
            ).all()
        return [r for r in map(row_of, rows) if r.state in PREPARING or expired(r, now)]
