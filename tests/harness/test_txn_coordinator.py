"""The transaction coordinator in process (ingest/service/txn_coordinator.py): what it
answers without Postgres, and that Postgres still decides everything else."""

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


def test_adding_an_added_partition_again_is_answered_without_postgres(
    cluster: InProcessCluster,
) -> None:
    c = cluster
    c.create_topic("txadd", partitions=2)
    node = c.any()
    coord = _coordinator(node)
    pid, epoch = node.run(coord.init("tx-add", 60_000))
    node.run(coord.add_partitions("tx-add", pid, epoch, [("txadd", 0)]))
    c.cut_postgres(node.broker_id)
    try:
        node.run(coord.add_partitions("tx-add", pid, epoch, [("txadd", 0)]))  # from memory
        new = coord.add_partitions("tx-add", pid, epoch, [("txadd", 0), ("txadd", 1)])
        assert _refused(node, new) == "COORDINATOR_NOT_AVAILABLE"  # a new one: Postgres
    finally:
        c.heal()
    node.run(coord.add_partitions("tx-add", pid, epoch, [("txadd", 1)]))
    node.run(coord.end("tx-add", pid, epoch, commit=False))
    # the transaction ended: adding what it had is a new transaction's first call again
    c.cut_postgres(node.broker_id)
    try:
        again = coord.add_partitions("tx-add", pid, epoch, [("txadd", 0)])
        assert _refused(node, again) == "COORDINATOR_NOT_AVAILABLE"
    finally:
        c.heal()
    row = coord.repo.get("tx-add")
    assert row is not None and row.state == "CompleteAbort" and row.partitions == ()
