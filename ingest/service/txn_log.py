"""Transactions on a partition's leader: the KIP-890 check of a transactional produce, the
spans it records, the commit/abort markers (control records) and what each isolation level
may read (the last stable offset; aborted records and markers left out), over each
partition's state in memory (txn_partition.py).

A partition's spans live in Postgres (metadata/transactions.py) and, on its leader, in
memory: they are loaded once per leader epoch (spans past the new leader's start offset
were truncated with the records they named) and changed only here, under the partition's
lock, so a marker is never written between a produce's check and its records.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct
import time
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import pyarrow as pa

from ingest.replication.group_commit import AppendResult
from ingest.replication.partition import Partition, Role
from ingest.service.txn_batch import Batched
from ingest.service.txn_partition import PartitionTxns, TxnView
from logformat.frame import encode_frame
from logformat.schema import RECORD_SCHEMA, TIMESTAMP
from logformat.txn_rows import MARKER_HEADER
from metadata.db_errors import POSTGRES_DOWN
from metadata.transactions import Span, TxnRepo
from metadata.txn_rows import ONGOING, TxnError, TxnRow
from metadata.txn_spans import Closed, Completed, NewSpans

if TYPE_CHECKING:
    from ingest.broker import Broker

log = logging.getLogger("tierlog.txn")
# Postgres away or a local read failing: reads go on with the spans last known here.
_SPANS_AWAY: tuple[type[Exception], ...] = (*POSTGRES_DOWN, OSError)

_MARKERS_KEPT = 10_000
# A partition's span change, a transaction's completion, or one left out (None).
_Change = NewSpans | Closed | Completed | None
ABORT, COMMIT = 0, 1  # Kafka's control record types
_CONTROL_KEY = struct.Struct(">hh")  # version 0, type
_CONTROL_VALUE = struct.Struct(">hi")  # version 0, coordinator epoch


def control_batch(commit: bool, now_ms: int) -> pa.RecordBatch:
    """One control record as Kafka writes it (key: version + type; value: version +
    coordinator epoch). Only its time is new: the rest is built once per kind (the arrays
    cost the event loop more than the rest of a marker's write, on every partition of
    every transaction)."""
    kind = _control_record(commit)
    timestamp = pa.array([now_ms], TIMESTAMP)
    return pa.RecordBatch.from_arrays(
        [kind.column(0), timestamp, *kind.columns[2:]], schema=RECORD_SCHEMA
    )


@functools.cache
def _control_record(commit: bool) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([0], pa.int32()),
            pa.array([0], TIMESTAMP),
            pa.array([_CONTROL_KEY.pack(0, COMMIT if commit else ABORT)], pa.binary()),
            pa.array([_CONTROL_VALUE.pack(0, 0)], pa.binary()),
            pa.array(
                [[{"key": MARKER_HEADER, "value": b"commit" if commit else b"abort"}]],
                RECORD_SCHEMA.field("headers").type,
            ),
        ],
        schema=RECORD_SCHEMA,
    )


class TxnLog:
    """The broker's transactional partitions (those it leads)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.repo = TxnRepo(broker.engine)
        self._parts: dict[tuple[str, int], PartitionTxns] = {}
        # When a marker for each producer id last began here (a sequence number): a check's
        # answer may mark the transaction's other partitions verified only if none began
        # since it read (_verify_others). Forgotten past _MARKERS_KEPT ids: then every
        # check that began before is taken as having seen one.
        self._marker_seq = 0
        self._markers: dict[int, int] = {}
        self._markers_floor = 0
        # What the partitions ask of Postgres at once goes in one call (txn_batch.py).
        self._producers = Batched[int, TxnRow | None](self._rows_of)
        self._span_changes = Batched[_Change, bool](self._write_spans, self._completable)

    def _rows_of(self, pids: list[int]) -> list[TxnRow | None]:
        rows = self.repo.by_producers(pids)
        return [rows.get(pid) for pid in pids]

    def _write_spans(self, changes: list[_Change]) -> list[bool]:
        """Each change written (True), or a completion left out (False: below)."""
        new = [c for c in changes if isinstance(c, NewSpans)]
        closed = [c for c in changes if isinstance(c, Closed)]
        self.repo.write_spans(new, closed, [c for c in changes if isinstance(c, Completed)])
        return [c is not None for c in changes]

    @staticmethod
    def _completable(changes: list[_Change]) -> list[_Change]:
        """On the loop as a run begins: a completion whose markers' span changes went in an
        earlier run that failed is left out (None): its row stays prepared, for a retry or
        the sweeper, as when a marker fails. Those in this run share its statement."""
        return [
            None if isinstance(c, Completed) and any(_failed(f) for f in c.after) else c
            for c in changes
        ]

    def complete(self, done: Completed) -> asyncio.Future[bool]:
        """The transaction's row finished in the statement that records the span changes
        `done.after` names (its markers' here, queued before it: write_marker's `queued`)
        or in a later one, never before them: whether it was (False: one of them failed)."""
        return self._span_changes.submit(done)

    async def partition(self, state: Partition) -> PartitionTxns:
        key = (state.topic, state.partition)
        txns = self._parts.get(key)
        if txns is None or txns.leader_epoch != state.leader_epoch:
            start = state.epoch_start_offset
            await asyncio.to_thread(self.repo.drop_spans_from, state.topic, state.partition, start)
            spans = await asyncio.to_thread(self.repo.spans, state.topic, state.partition)
            txns = self._parts.get(key)
            if txns is None or txns.leader_epoch != state.leader_epoch:
                txns = self._parts[key] = PartitionTxns(state.leader_epoch, spans)
        return txns

    async def view(self, state: Partition, committed: bool) -> TxnView:
        """What a read of `state` may see. A follower (a KIP-392 read) has no spans of its
        own: it reads the leader's from Postgres. Reads must not stop with Postgres: while it
        cannot be reached, the spans last known here are used, and a partition never seen
        with transactions is read as having none (markers still left out by their header)."""
        hw = state.high_watermark
        try:
            if state.role is not Role.LEADER:
                spans = await asyncio.to_thread(self.repo.spans, state.topic, state.partition)
                return PartitionTxns(state.leader_epoch, spans).view(hw, committed)
            return (await self.partition(state)).view(hw, committed)
        except _SPANS_AWAY as exc:
            log.warning(
                "transaction spans unavailable: %r",
                exc,
                extra={"topic": state.topic, "partition": state.partition},
            )
            known = self._parts.get((state.topic, state.partition))
            if known is None:
                return TxnView(hw, (), transactional=True)
            return known.view(hw, committed)

    async def stable_offset(self, state: Partition) -> int:
        return (await self.partition(state)).stable(state.high_watermark)

    async def prune(self) -> int:
        """Spans below the log start of the partitions this broker leads (their records are
        deleted, or tiered without aborted records and markers: tiering/txn_filter.py)."""
        pruned = 0
        for (topic, partition), txns in list(self._parts.items()):
            state = self.broker.leader_state(topic, partition)
            if state is None or state.leader_epoch != txns.leader_epoch:
                continue
            start = state.log.log_start_offset
            if not any(_prunable(s, start) for s in txns.spans):
                continue
            async with txns.lock:
                pruned += await asyncio.to_thread(
                    self.repo.prune_spans_below, topic, partition, start
                )
                newest = max((s.first_offset for s in txns.spans if s.kind == "marker"), default=-1)
                txns.spans = [
                    s for s in txns.spans if not _prunable(s, start) or s.first_offset == newest
                ]
        return pruned

    async def described_stable(self, state: Partition) -> int | None:
        """The last stable offset for describe (the Spark source plans to it); None while
        Postgres cannot be reached and this leader knows no spans of the partition."""
        try:
            return await self.stable_offset(state)
        except _SPANS_AWAY:
            known = self._parts.get((state.topic, state.partition))
            return None if known is None else known.stable(state.high_watermark)

    async def submit(
        self,
        state: Partition,
        pid: int,
        epoch: int,
        submit: Callable[[], asyncio.Future[list[AppendResult]]],
    ) -> asyncio.Future[list[AppendResult]]:
        """A transactional produce: checked against its transaction (KIP-890: the partition
        must have been added to it) and queued; the future it returns resolves once the
        records are written and their offsets recorded as an ongoing span (so before the
        producer hears of them). A marker written here waits for those spans first, so the
        connection's next request need not."""
        txns = await self.partition(state)
        async with txns.lock:
            if (pid, epoch) not in txns.verified:
                asked = self.markers_begun()
                row = await self._check(state, pid, epoch)
                txns.verified.add((pid, epoch))
                self.added(pid, epoch, row.partitions, asked)
            floor = state.log.log_end_offset
            recorded = asyncio.ensure_future(self._record(txns, state, pid, submit()))
            txns.pending.add(recorded)
            txns.floors[recorded] = floor
            recorded.add_done_callback(txns.pending.discard)
            recorded.add_done_callback(lambda f: txns.floors.pop(f, None))
            return recorded

    async def _record(
        self,
        txns: PartitionTxns,
        state: Partition,
        pid: int,
        queued: asyncio.Future[list[AppendResult]],
    ) -> list[AppendResult]:
        results = await queued
        spans = tuple(Span(r.base_offset, r.last_offset, pid, "ongoing") for r in results)
        try:
            await self._span_changes(NewSpans(state.topic, state.partition, spans))
        finally:  # written, so known here even if Postgres failed: its marker records them
            txns.add_ongoing(spans)
        return results

    def ending(self, pid: int, parts: Iterable[tuple[str, int]]) -> None:
        """Producer `pid`'s transaction over `parts` is ending (PrepareCommit/PrepareAbort
        is durable): none of them takes its batches unchecked any more, though its marker
        may be written later (the check then finds the transaction ending and refuses
        them). Only a transaction's own partitions are ever marked checked (added())."""
        self._marker_began(pid)
        for key in parts:
            txns = self._parts.get(key)
            if txns is not None:
                txns.verified = {v for v in txns.verified if v[0] != pid}

    def _marker_began(self, pid: int) -> None:
        self._marker_seq += 1
        if len(self._markers) >= _MARKERS_KEPT:
            self._markers.clear()
            self._markers_floor = self._marker_seq
        self._markers[pid] = self._marker_seq

    def markers_begun(self) -> int:
        """A mark to pass to added(): how many markers began here so far."""
        return self._marker_seq

    def added(self, pid: int, epoch: int, parts: Iterable[tuple[str, int]], asked: int) -> None:
        """Postgres said, after `asked = markers_begun()`, that producer (pid, epoch) has a
        transaction under way with `parts` in it (a check's read, or this broker's
        coordinator adding them): those this broker leads take its batches without a check
        of their own (one read per transaction and broker at most, where each partition's
        first batch cost one, in turn on the connection). Only if no marker for the
        producer began since: the transaction may have ended. A marker that begins after
        this clears them itself."""
        if self._markers.get(pid, self._markers_floor) > asked:
            return
        for topic, partition in parts:
            txns = self._parts.get((topic, partition))
            state = self.broker.leader_state(topic, partition)
            if txns is not None and state is not None and state.leader_epoch == txns.leader_epoch:
                txns.verified.add((pid, epoch))

    async def _check(self, state: Partition, pid: int, epoch: int) -> TxnRow:
        row = await self._producers(pid)
        tp = f"{state.topic}-{state.partition}"
        if row is None:
            raise TxnError("INVALID_PRODUCER_ID_MAPPING", f"producer {pid} has no transactional id")
        if row.producer_epoch != epoch:
            raise TxnError(
                "INVALID_PRODUCER_EPOCH",
                f"producer {pid} epoch {epoch} is fenced by epoch {row.producer_epoch}",
            )
        if row.state != ONGOING or (state.topic, state.partition) not in row.partitions:
            raise TxnError(
                "INVALID_TXN_STATE",
                f"{tp} is not in a transaction of producer {pid} under way "
                f"(state {row.state}): AddPartitionsToTxn first",
            )
        return row

    async def write_marker(
        self,
        state: Partition,
        pid: int,
        commit: bool,
        timeout_s: float,
        queued: asyncio.Future[tuple[asyncio.Future[bool], ...]] | None = None,
    ) -> int:
        """The control record ending producer `pid`'s transaction here, replicated to the
        ISR before its spans change: its offset. `queued` gets the span changes once they
        are queued (a completion queued after them is written with them or after)."""
        txns = await self.partition(state)
        view = await self.broker.cache.require_topic(state.topic, state.partition)
        frame = encode_frame(control_batch(commit, int(time.time() * 1000)))
        self._marker_began(pid)
        async with txns.lock:
            if txns.pending:  # every span written before the marker is recorded first
                await asyncio.wait(set(txns.pending))
            results = await state.append([frame], -1, view.config.min_insync_replicas, timeout_s)
            at = results[0].base_offset
            # An abort records its spans as aborted in the same call: one whose own write
            # failed (Postgres away) is known to a later leader all the same.
            ended = () if commit else txns.aborting(pid)
            changes = (
                self._span_changes.submit(Closed(state.topic, state.partition, pid, commit, at)),
                self._span_changes.submit(NewSpans(state.topic, state.partition, ended)),
            )
            if queued is not None and not queued.done():
                queued.set_result(changes)
            await asyncio.gather(*changes)
            txns.close(pid, commit, Span(at, at, pid, "marker"))
            txns.verified = {v for v in txns.verified if v[0] != pid}
            return at


def _failed(change: object) -> bool:
    """A span change's future that ended without being written."""
    return (
        isinstance(change, asyncio.Future)
        and change.done()
        and (change.cancelled() or change.exception() is not None)
    )


def _prunable(span: Span, log_start: int) -> bool:
    return span.kind != "ongoing" and span.last_offset < log_start


_LOGS: weakref.WeakKeyDictionary[Broker, TxnLog] = weakref.WeakKeyDictionary()


def txn_log(broker: Broker) -> TxnLog:
    """The broker's TxnLog (one per broker, made on first use)."""
    found = _LOGS.get(broker)
    if found is None:
        found = _LOGS[broker] = TxnLog(broker)
    return found
