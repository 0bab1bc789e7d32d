"""The transaction coordinator in process (ingest/service/txn_coordinator.py): Postgres
decides, whichever broker a client's coordinator is or was."""

from __future__ import annotations

import pytest

from ingest.service.txn_coordinator import TxnCoordinator, coordinator
from metadata.transactions import TxnError
from tests.harness.cluster import InProcessCluster
from tests.harness.node import Node


def _coordinator(node: Node) -> TxnCoordinator:
    async def on_loop() -> TxnCoordinator:
        return coordinator(node.b)  # its sweeper is a task of the harness loop

    return node.run(on_loop())


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
    first.run(here.add_partitions("tx-moved", pid, epoch, [("txmoved", 0)]))
    row = here.repo.get("tx-moved")
    assert row is not None and (row.state, row.partitions) == ("Ongoing", (("txmoved", 0),))
    first.run(here.end("tx-moved", pid, epoch, commit=False))
