"""The transaction coordinator (KIP-98): InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn over the state in Postgres
(metadata/transactions.py), and the markers written to every partition of an ended
transaction (WriteTxnMarkers' effect: on the partition's leader, this broker's own or
another's through its internal endpoint).

Every broker can serve every transactional id; FindCoordinator names one per id, the same
whoever is asked (txn_placement.py), so a client stays with one until it dies and then moves
to the next, its transaction under way with it. A transaction whose coordinator died in
PrepareCommit/PrepareAbort is completed by the next call for its id or by the sweeper every
broker runs, which also aborts transactions past their timeout (bumping the epoch: the
producer is fenced).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ingest.service.txn_log import txn_log
from logformat.errors import ErrorCode, TierlogError
from metadata.transactions import TxnRepo
from metadata.txn_rows import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    PREPARE_COMMIT,
    Initialized,
    TxnError,
    TxnRow,
)
from metadata.txn_spans import Completed

if TYPE_CHECKING:
    from ingest.broker import Broker

log = logging.getLogger("tierlog.txn")

SWEEP_S = 1.0  # how often a broker looks for transactions to abort or complete
PRUNE_EVERY = 60  # sweeps between prunes of the spans below the log start (retention's pace)
STUCK = timedelta(seconds=5)  # a prepared transaction no coordinator finished in this long
MARKER_PATH = "/internal/txn/markers"
# group, member, generation, [(topic, partition, offset, metadata)]: applies committed offsets
# A marker's span changes on this broker, once queued (write_marker's `queued`).
Queued = asyncio.Future[tuple[asyncio.Future[bool], ...]]
OffsetCommit = Callable[[str, str, int, list[tuple[str, int, int, str | None]]], Awaitable[None]]


class TxnCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.repo = TxnRepo(broker.engine)
        self.commit_offsets: OffsetCommit | None = None  # the listener's groups, when mounted
        self._sweeper: asyncio.Task[None] | None = None
        # EndTxn is answered once PrepareCommit/PrepareAbort is durable (as Kafka answers
        # it); the markers are written after, and the id's next call waits for them here.
        self._completing: dict[str, asyncio.Task[None]] = {}

    def start(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="txn-sweeper")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(BaseException):
                await self._sweeper
            self._sweeper = None
        # Completions under way get a request's time to finish; one cancelled is finished by
        # whichever broker's sweeper finds it prepared.
        completing = list(self._completing.values())
        if completing:
            await asyncio.wait(completing, timeout=self.broker.config.request_timeout_ms / 1000)
        for task in completing:
            task.cancel()

    async def _settled(self, tid: str) -> None:
        """The id's transaction that this broker is completing, completed (or failed: the
        call then finds it prepared, as on a broker that never completed it)."""
        task = self._completing.get(tid)
        if task is not None:
            await asyncio.wait([task])

    def _complete_later(self, row: TxnRow) -> None:
        tid = row.transactional_id
        task = asyncio.create_task(self._complete_logged(row), name=f"txn-complete-{tid}")
        self._completing[tid] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._completing.get(tid) is done:
                del self._completing[tid]

        task.add_done_callback(forget)

    async def _complete_logged(self, row: TxnRow) -> None:
        try:
            await self.complete(row)
        except Exception as exc:  # the row stays prepared: the sweeper finishes it
            log.warning(
                "transaction %s not completed: %r",
                row.transactional_id,
                exc,
                extra={"node": self.broker.config.broker_id},
            )

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await asyncio.to_thread(fn, *args)
        except TxnError:
            raise
        except Exception as exc:  # Postgres unreachable: retriable for the client
            log.warning("transaction state unavailable: %r", exc)
            raise TxnError("COORDINATOR_NOT_AVAILABLE", "transaction state unavailable") from exc

    async def init(self, tid: str, timeout_ms: int) -> Initialized:
        allocate = self.broker.partition_repo.allocate_producer_id
        await self._settled(tid)
        for _ in range(3):
            got = await self._run(self.repo.init, tid, timeout_ms, allocate)
            if isinstance(got, Initialized):
                return got
            await self.complete(got)  # an earlier transaction first (aborted if ongoing)
        raise TxnError("CONCURRENT_TRANSACTIONS", f"{tid!r} is busy: retry")

    async def add_partitions(
        self, tid: str, pid: int, epoch: int, parts: Sequence[tuple[str, int]]
    ) -> None:
        """AddPartitionsToTxn, in one call on a worker thread (TxnRepo.add_new_partitions).
        Never from this broker's memory: another broker may have ended the transaction since
        (the client's coordinator moved away and back), and a memory of it would answer for
        a transaction that no longer exists. The partitions this broker leads hear of it
        (TxnLog.added): their first batches need no check of their own."""
        await self._settled(tid)
        leaders = txn_log(self.broker)
        asked = leaders.markers_begun()
        await self._run(self.repo.add_new_partitions, tid, pid, epoch, list(parts))
        leaders.added(pid, epoch, parts, asked)

    async def add_offsets(self, tid: str, pid: int, epoch: int, group: str) -> None:
        await self._settled(tid)
        await self._run(self.repo.add_offsets, tid, pid, epoch, group)

    async def txn_offsets(
        self,
        tid: str,
        pid: int,
        epoch: int,
        group: str,
        member: tuple[str, int],
        entries: list[tuple[str, int, int, str | None]],
    ) -> None:
        await self._settled(tid)
        await self._run(self.repo.txn_offsets, tid, pid, epoch, group, member, entries)

    async def end(self, tid: str, pid: int, epoch: int, commit: bool) -> None:
        """EndTxn: answered once the decision is durable (PrepareCommit/PrepareAbort), as
        Kafka answers it; the markers are written after it, and the id's next call here
        waits for them (another broker's answers CONCURRENT_TRANSACTIONS until they are:
        retriable for the client)."""
        await self._settled(tid)
        row = await self._run(self.repo.end, tid, pid, epoch, commit)
        if row is not None:
            txn_log(self.broker).ending(row.producer_id, row.partitions)
            self._complete_later(row)

    async def complete(self, row: TxnRow) -> None:
        """Markers to every partition, then (commit) the group offsets, then Complete*."""
        commit = row.state == PREPARE_COMMIT
        txn_log(self.broker).ending(row.producer_id, row.partitions)
        if commit and any(pending.get("entries") for pending in row.offsets.values()):
            await asyncio.gather(
                *(self._marker(t, p, row.producer_id, commit) for t, p in row.partitions)
            )
            await self._apply_offsets(row)
            await self._run(self.repo.finish, row)
        else:
            await self._markers_completing(row, commit)
        # Debug: a line per transaction at info was 2% of the transactional path's CPU
        # (py-spy, bench.kafka_protocol --txn-only) and, at thousands a second, noise.
        log.debug(
            "transaction %s",
            "committed" if commit else "aborted",
            extra={
                "transactional_id": row.transactional_id,
                "producer_id": row.producer_id,
                "partitions": len(row.partitions),
                "node": self.broker.config.broker_id,
            },
        )

    async def _apply_offsets(self, row: TxnRow) -> None:
        for group, pending in row.offsets.items():
            entries = [(str(t), int(p), int(o), m) for t, p, o, m in pending.get("entries", [])]
            if not entries:
                continue
            if self.commit_offsets is None:
                raise TxnError("COORDINATOR_NOT_AVAILABLE", "this broker serves no groups")
            await self.commit_offsets(
                group, str(pending.get("member", "")), int(pending.get("generation", -1)), entries
            )

    async def _markers_completing(self, row: TxnRow, commit: bool) -> None:
        """The markers, and Complete* written in the statement that records this broker's
        markers' spans (or in one after it): a round trip fewer per transaction. Written
        only if every marker's were: else the row stays prepared, as when a marker fails
        (the client's retry or the sweeper completes it)."""
        loop = asyncio.get_running_loop()
        queued: list[Queued] = [loop.create_future() for _ in row.partitions]
        markers = asyncio.gather(
            *(
                self._marker(t, p, row.producer_id, commit, q)
                for (t, p), q in zip(row.partitions, queued, strict=True)
            )
        )
        all_queued = asyncio.gather(*queued)
        either: list[asyncio.Future[Any]] = [markers, all_queued]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not all_queued.done():  # a marker failed before its spans were queued
            all_queued.cancel()
            await markers
        done = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        after = tuple(change for changes in all_queued.result() for change in changes)
        finished = txn_log(self.broker).complete(
            Completed(row.transactional_id, row.producer_id, row.state, done, after)
        )
        await markers
        if not await finished:
            raise TxnError("COORDINATOR_NOT_AVAILABLE", "a marker's spans were not recorded")

    async def _marker(
        self, topic: str, partition: int, pid: int, commit: bool, queued: Queued | None = None
    ) -> None:
        """The marker on the partition's leader; `queued` gets this broker's span changes
        for it once queued (none when another broker leads it: written once it answered)."""
        broker = self.broker
        timeout_s = broker.config.request_timeout_ms / 1000
        state = broker.leader_state(topic, partition)
        if state is not None:
            await txn_log(broker).write_marker(state, pid, commit, timeout_s, queued)
            return
        view = await broker.cache.require_topic(topic, partition)
        leader = view.partitions[partition].leader
        url = None if leader is None else broker.cache.broker_url(leader)
        if url is None:
            raise TierlogError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader for its marker"
            )
        body = {"topic": topic, "partition": partition, "producer_id": pid, "commit": commit}
        await broker.forwarder.post_json(f"{url}{MARKER_PATH}", body)
        if queued is not None and not queued.done():
            queued.set_result(())

    async def _sweep_forever(self) -> None:
        sweeps = 0
        while True:
            await asyncio.sleep(SWEEP_S)
            sweeps += 1
            with contextlib.suppress(Exception):
                await self.sweep()
            if sweeps % PRUNE_EVERY == 0:
                try:
                    await txn_log(self.broker).prune()
                except Exception as exc:  # Postgres away: the next prune does it
                    log.warning("pruning transaction spans failed: %r", exc)

    async def sweep(self) -> None:
        """Abort what timed out; finish what a dead coordinator left prepared."""
        for row in await asyncio.to_thread(self.repo.due, STUCK):
            if row.transactional_id in self._completing:
                continue  # this broker is completing it
            try:
                if row.state == "Ongoing":
                    aborted = await asyncio.to_thread(
                        self.repo.abort_if_expired, row.transactional_id
                    )
                    if aborted is not None:
                        log.info(
                            "transaction timed out",
                            extra={"transactional_id": row.transactional_id},
                        )
                        await self.complete(aborted)
                else:
                    await self.complete(row)
            except Exception as exc:  # the next sweep tries again
                log.warning("transaction %s not completed: %r", row.transactional_id, exc)


_COORDINATORS: weakref.WeakKeyDictionary[Broker, TxnCoordinator] = weakref.WeakKeyDictionary()


async def stop_coordinator(broker: Broker) -> None:
    found = _COORDINATORS.get(broker)
    if found is not None:
        await found.stop()


def coordinator(broker: Broker) -> TxnCoordinator:
    """The broker's coordinator, its sweeper started on first use."""
    found = _COORDINATORS.get(broker)
    if found is None:
        found = _COORDINATORS[broker] = TxnCoordinator(broker)
    found.start()
    return found


class Transactions:
    """What the front-ends reach of transactions: the broker's coordinator (its sweeper
    started on first use) and the markers another broker's coordinator asks of this one."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def coordinator(self) -> TxnCoordinator:
        return coordinator(self._broker)

    async def stop(self) -> None:
        await stop_coordinator(self._broker)

    async def write_marker(self, topic: str, partition: int, pid: int, commit: bool) -> int:
        """The marker ending producer `pid`'s transaction on a partition this broker leads
        (WriteTxnMarkers' effect, asked over /internal/txn/markers): its offset."""
        broker = self._broker
        await broker.cache.require_topic(topic, partition)
        state = broker.require_leader(topic, partition)
        timeout_s = broker.config.request_timeout_ms / 1000
        return await txn_log(broker).write_marker(state, pid, commit, timeout_s)
