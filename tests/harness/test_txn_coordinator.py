"""The transaction coordinator in process (ingest/service/txn_coordinator.py): Postgres
decides, whichever broker a client's coordinator is or was."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from ingest.service.txn_coordinator import TxnCoordinator, coordinator
from ingest.service.txn_log import txn_log
from logformat.frame import encode_frame
from logformat.schema import RECORD_SCHEMA, TIMESTAMP
from metadata.txn_engine import unpinged
from metadata.txn_rows import TxnError
from tests.harness.cluster import InProcessCluster
from tests.harness.node import Node
from tests.integration.cluster import wait_for


def _coordinator(node: Node) -> TxnCoordinator:
    async def on_loop() -> TxnCoordinator:
        return coordinator(node.b)  # its sweeper is a task of the harness loop

    return node.run(on_loop())


def _state(coord: TxnCoordinator, tid: str) -> str | None:
    row = coord.repo.get(tid)
    return None if row is None else row.state


def _refused(node: Node, call: object) -> str:
    with pytest.raises(TxnError) as info:
        node.run(call)  # type: ignore[arg-type]
    return info.value.kafka_name


def test_adding_an_added_partition_again_writes_nothing(cluster: InProcessCluster) -> None:
    """A repeat is answered from one read: the row is not rewritten (no lock, no write)."""
    c = cluster
    c.create_topic("txadd", partitions=2)
    node = c.any()
    coord = _coordinator(node)
    pid, epoch = node.run(coord.init("tx-add", 60_000))
    node.run(coord.add_partitions("tx-add", pid, epoch, [("txadd", 0), ("txadd", 1)]))
    before = coord.repo.get("tx-add")
    node.run(coord.add_partitions("tx-add", pid, epoch, [("txadd", 1)]))
    after = coord.repo.get("tx-add")
    assert before is not None and after == before  # updated_at included: not written
    node.run(coord.end("tx-add", pid, epoch, commit=False))


def test_a_transaction_ended_on_another_broker_is_not_added_to_from_memory(
    cluster: InProcessCluster,
) -> None:
    """The client's coordinator moved away and back (librdkafka re-asks FindCoordinator,
    and any broker may answer): its transaction committed on the other broker, and the next
    one adds the same partition on the first again. That partition is in the new
    transaction, so the leader takes its batches (it refused them with INVALID_TXN_STATE,
    fatal for the client once it aborted, when the first broker remembered the partition as
    added from the old transaction)."""
    c = cluster
    c.create_topic("txmoved")
    first = c.any()
    other = c.any(exclude=first.broker_id)
    here, there = _coordinator(first), _coordinator(other)
    pid, epoch = first.run(here.init("tx-moved", 60_000))
    first.run(here.add_partitions("tx-moved", pid, epoch, [("txmoved", 0)]))
    other.run(there.end("tx-moved", pid, epoch, commit=True))
    # EndTxn is answered before the markers; the client's retries of CONCURRENT_TRANSACTIONS
    # on the first broker go on until the other wrote them.
    wait_for("the commit completed", lambda: _state(here, "tx-moved") == "CompleteCommit")
    first.run(here.add_partitions("tx-moved", pid, epoch, [("txmoved", 0)]))
    row = here.repo.get("tx-moved")
    assert row is not None and (row.state, row.partitions) == ("Ongoing", (("txmoved", 0),))
    first.run(here.end("tx-moved", pid, epoch, commit=False))


def _batch(node: Node, topic: str, pid: int, epoch: int, partition: int = 0) -> Any:
    """A transactional produce of one record to a partition through its leader's TxnLog."""
    state = node.b.leader_state(topic, partition)
    assert state is not None
    frame = encode_frame(
        pa.RecordBatch.from_arrays(
            [
                pa.array([0], pa.int32()),
                pa.array([0], TIMESTAMP),
                pa.array([b"k"], pa.binary()),
                pa.array([b"v"], pa.binary()),
                pa.array([[]], RECORD_SCHEMA.field("headers").type),
            ],
            schema=RECORD_SCHEMA,
        )
    )

    async def produce() -> Any:
        queued = await txn_log(node.b).submit(
            state, pid, epoch, lambda: state.submit([frame], -1, 1)
        )
        return await queued

    return node.run(produce())


@contextmanager
def _watching(engine: Engine, record: Callable[..., None]) -> Iterator[None]:
    """`record` sees every statement of the engine and of its sibling the transaction
    path's statements go on (metadata/txn_engine.py)."""
    for target in (engine, unpinged(engine)):
        event.listen(target, "before_cursor_execute", record)
    try:
        yield
    finally:
        for target in (engine, unpinged(engine)):
            event.remove(target, "before_cursor_execute", record)


@contextmanager
def _producer_checks(engine: Engine) -> Iterator[list[str]]:
    """The statements reading producers' transactions (a leader's KIP-890 check): reads of
    the table by producer id, so a coordinator's timeout scan running meanwhile is not one."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if (
            statement.lstrip().upper().startswith("SELECT")
            and "kafka_transactions" in statement
            and "kafka_transactions.producer_id IN" in statement
        ):
            seen.append(statement)

    with _watching(engine, record):
        yield seen


def _known_to_leader(node: Node, topic: str, partition: int = 0) -> None:
    """The leader has the partition's transaction state loaded (as after a first one)."""
    state = node.b.leader_state(topic, partition)
    assert state is not None
    node.run(txn_log(node.b).partition(state))


def _added_on_leader(
    c: InProcessCluster, topic: str, tid: str
) -> tuple[Node, TxnCoordinator, int, int]:
    """A new topic's leader as coordinator of transaction `tid`, begun with partition 0
    added: (leader, coordinator, producer id, epoch)."""
    c.create_topic(topic)
    leader = c.leader(topic)
    coord = _coordinator(leader)
    _known_to_leader(leader, topic)
    pid, epoch = leader.run(coord.init(tid, 60_000))
    leader.run(coord.add_partitions(tid, pid, epoch, [(topic, 0)]))
    return leader, coord, pid, epoch


def test_partitions_added_on_their_leader_take_batches_without_a_check(
    cluster: InProcessCluster,
) -> None:
    """The coordinator is the partition's leader: AddPartitionsToTxn tells the partition,
    so the transaction's first batch there reads no producer row (each partition's first
    batch cost a read, in turn on the client's connection). Its marker ends that: the same
    producer's next batch without AddPartitionsToTxn is refused (KIP-890)."""
    leader, coord, pid, epoch = _added_on_leader(cluster, "txnote", "tx-note")
    with _producer_checks(leader.b.engine) as checks:
        _batch(leader, "txnote", pid, epoch)
    assert checks == []
    leader.run(coord.end("tx-note", pid, epoch, commit=True))
    with pytest.raises(TxnError) as refused:
        _batch(leader, "txnote", pid, epoch)
    assert refused.value.kafka_name == "INVALID_TXN_STATE"


def test_a_check_read_before_a_marker_began_tells_no_partition(
    cluster: InProcessCluster,
) -> None:
    """What Postgres said of a transaction before a marker for its producer began may be
    of a transaction that has ended since: it marks no partition as checked."""
    leader, coord, pid, epoch = _added_on_leader(cluster, "txstale", "tx-stale")
    log = txn_log(leader.b)
    asked = log.markers_begun()  # a read here still saw the transaction under way ...
    leader.run(coord.end("tx-stale", pid, epoch, commit=False))  # ... then it ended
    log.added(pid, epoch, [("txstale", 0)], asked)  # the read's answer comes in late
    with pytest.raises(TxnError) as refused:
        _batch(leader, "txstale", pid, epoch)
    assert refused.value.kafka_name == "INVALID_TXN_STATE"


def test_end_is_answered_prepared_and_the_next_call_waits_for_the_markers(
    cluster: InProcessCluster,
) -> None:
    """EndTxn returns once the commit is decided (Kafka answers it so); the producer's next
    AddPartitionsToTxn on the same coordinator waits for the markers instead of answering
    CONCURRENT_TRANSACTIONS (librdkafka would wait its retry backoff), and the new
    transaction starts after the old one's marker."""
    c = cluster
    c.create_topic("txnext")
    node = c.any()
    coord = _coordinator(node)
    pid, epoch = node.run(coord.init("tx-next", 60_000))
    node.run(coord.add_partitions("tx-next", pid, epoch, [("txnext", 0)]))
    node.run(coord.end("tx-next", pid, epoch, commit=True))
    node.run(coord.add_partitions("tx-next", pid, epoch, [("txnext", 0)]))
    assert _state(coord, "tx-next") == "Ongoing"
    assert [s.kind for s in coord.repo.spans("txnext", 0) if s.producer_id == pid] == ["marker"]
    node.run(coord.end("tx-next", pid, epoch, commit=False))


def test_one_check_tells_the_transactions_other_partitions_on_that_leader(
    cluster: InProcessCluster,
) -> None:
    """The coordinator is another broker: the leader's first batch of the transaction reads
    the producer's row, which names the transaction's partitions; its other partition on
    the same leader takes its first batch without a read of its own."""
    c = cluster
    c.create_topic("txboth", partitions=4)
    led: dict[int, list[int]] = {}
    for p in range(4):
        led.setdefault(c.leader("txboth", p).broker_id, []).append(p)
    leader_id, (a, b, *_) = next((n, ps) for n, ps in led.items() if len(ps) >= 2)
    leader = c.brokers[leader_id]
    other = c.any(exclude=leader_id)
    coord = _coordinator(other)
    for p in (a, b):
        _known_to_leader(leader, "txboth", p)
    pid, epoch = other.run(coord.init("tx-both", 60_000))
    other.run(coord.add_partitions("tx-both", pid, epoch, [("txboth", a), ("txboth", b)]))
    with _producer_checks(leader.b.engine) as first:
        _batch(leader, "txboth", pid, epoch, a)
    with _producer_checks(leader.b.engine) as second:
        _batch(leader, "txboth", pid, epoch, b)
    assert (len(first), second) == (1, [])
    other.run(coord.end("tx-both", pid, epoch, commit=False))


def test_a_completion_here_writes_complete_with_the_markers_spans(
    cluster: InProcessCluster,
) -> None:
    """The coordinator leads the transaction's partitions: Complete* goes in the statement
    recording the markers' spans, not in one of its own."""
    leader, coord, pid, epoch = _added_on_leader(cluster, "txdone", "tx-done")
    _batch(leader, "txdone", pid, epoch)
    with _row_updates(leader.b.engine) as updates:
        leader.run(coord.end("tx-done", pid, epoch, commit=True))
        wait_for("the commit completed", lambda: _state(coord, "tx-done") == "CompleteCommit")
    assert len(updates) == 1 and "PrepareCommit" in str(updates[0][1]), updates  # EndTxn's


@contextmanager
def _row_updates(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The statements that update transactions' rows on their own."""
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE KAFKA_TRANSACTIONS"):
            seen.append((statement, params))

    with _watching(engine, record):
        yield seen
