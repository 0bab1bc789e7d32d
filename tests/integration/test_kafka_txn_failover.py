"""Transactions through failures, on three broker processes (issue 30): a partition leader
killed in the middle of a transaction, and the coordinator's broker killed in the middle of
a commit. Either way the transaction's records are all readable (read_committed) or none."""

from __future__ import annotations

import contextlib
import signal
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from kio.serial.errors import BufferUnderflow

from metadata.db import make_engine
from metadata.transactions import TxnRepo
from metadata.txn_rows import COMPLETE_COMMIT, PREPARE_COMMIT
from tests.integration import kafka_txn_wire as wire
from tests.integration import txn_apps
from tests.integration.cluster import Cluster, wait_for

with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient


@pytest.fixture(scope="module")
def cluster(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, TxnRepo]]:
    db = db_factory()
    c = Cluster(db, Path(tmp_path_factory.mktemp("txn-cluster")), 3, kafka=True).start()
    engine = make_engine(db)
    try:
        yield c, TxnRepo(engine)
    finally:
        c.stop()
        engine.dispose()


def _values(bootstrap: str, topic: str, until: int = 0) -> list[bytes]:
    got = txn_apps.read_all(bootstrap, topic, "read_committed", 2, until=until)
    return sorted(m.value() for m in got)


def test_list_transactions_names_each_transaction_once(cluster: Any) -> None:
    """Admin clients ask every broker and join the answers; every broker reads the same
    store, so one answers for all (kafka-python's list_transactions() asks all three)."""
    c, _ = cluster
    topic, tid = f"tls-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    c.create_topic(topic, 1, 3, min_insync_replicas=2)
    p = Producer({"bootstrap.servers": c.bootstrap(), "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"open")
    assert p.flush(30) == 0
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap())
    try:
        answers = admin.list_transactions()
        assert len(answers) == 3  # one answer per broker
        listed = [t.transactional_id for ts in answers.values() for t in ts]
        assert listed.count(tid) == 1, answers
    finally:
        admin.close()
        p.abort_transaction(30)


def test_every_broker_names_one_coordinator_per_group(cluster: Any) -> None:
    """As Kafka has one coordinator per group, every broker names the same one for a group
    (not itself), and the groups spread over the brokers: librdkafka asks again every second,
    of any broker, and drops a JoinGroup in flight when the answer changes."""
    c, _ = cluster
    named = {
        group: {wire.coordinator(f"127.0.0.1:{c.kafka_ports[i]}", group, 0) for i in c.brokers}
        for group in (f"g-{i}" for i in range(30))
    }
    assert all(len(nodes) == 1 for nodes in named.values()), named
    assert len({n for nodes in named.values() for n in nodes}) > 1, named


def test_leader_killed_mid_transaction_is_all_or_nothing(cluster: Any) -> None:
    c, _ = cluster
    topic = f"tl-{uuid.uuid4().hex[:6]}"
    c.create_topic(topic, 2, 3, min_insync_replicas=2)
    p = Producer(
        {
            "bootstrap.servers": c.bootstrap(),
            "transactional.id": f"tx-{uuid.uuid4().hex[:6]}",
            "topic.metadata.refresh.interval.ms": 1000,
            "linger.ms": 5,
        }
    )
    p.init_transactions(30)
    p.begin_transaction()
    sent = [b"%03d" % i for i in range(200)]
    for i, v in enumerate(sent[:100]):
        p.produce(topic, v, partition=i % 2)
    assert p.flush(30) == 0
    leader = c.leader(topic, 0)
    leader.kill(signal.SIGKILL)  # the transaction is open, half its records written
    try:
        for i, v in enumerate(sent[100:]):
            p.produce(topic, v, partition=i % 2)
        try:
            p.flush(60)
            p.commit_transaction(60)
            committed = True
        except KafkaException as exc:
            assert exc.args[0].txn_requires_abort(), exc
            p.abort_transaction(60)
            committed = False
        survivors = c.bootstrap(exclude=leader.broker_id)
        expected = sorted(sent) if committed else []
        assert _values(survivors, topic, until=len(expected)) == expected
    finally:
        leader.start()


def test_coordinator_killed_mid_commit_is_all_or_nothing(cluster: Any) -> None:
    """The markers cannot be written while partition 0's leader is paused: EndTxn leaves the
    transaction in PrepareCommit when its coordinator is killed, and a surviving broker's
    sweeper completes it once the leader is back."""
    c, repo = cluster
    topic, tid = f"tc-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    c.create_topic(topic, 2, 3, min_insync_replicas=2)
    address = {i: f"127.0.0.1:{port}" for i, port in c.kafka_ports.items()}
    leaders = [c.leader(topic, 0), c.leader(topic, 1)]
    paused = leaders[0]
    coordinator = c.any(exclude=paused.broker_id)
    at = address[coordinator.broker_id]  # FindCoordinator names the broker asked
    init = wire.init_producer(at, tid)
    pid, epoch = int(init.producer_id), int(init.producer_epoch)
    assert wire.add_partition(at, tid, pid, epoch, topic, (0, 1)) == 0
    for partition, leader in enumerate(leaders):
        batch = wire.txn_batch(pid, epoch, 0, b"p%d" % partition)
        assert wire.produce_txn(address[leader.broker_id], topic, batch, tid, partition) == 0
    paused.kill(signal.SIGSTOP)
    ending = threading.Thread(
        target=lambda: _quietly(wire.end_txn, at, tid, pid, epoch), daemon=True
    )
    ending.start()
    try:
        wait_for("PrepareCommit", lambda: _state(repo, tid) == PREPARE_COMMIT or None)
        coordinator.kill(signal.SIGKILL)  # mid-commit: no marker could be written yet
        paused.kill(signal.SIGCONT)
        wait_for("completed", lambda: _state(repo, tid) == COMPLETE_COMMIT or None, timeout=90)
        survivors = c.bootstrap(exclude=coordinator.broker_id)
        assert _values(survivors, topic, until=2) == [b"p0", b"p1"]
    finally:
        paused.kill(signal.SIGCONT)
        coordinator.start()


def _state(repo: TxnRepo, tid: str) -> str | None:
    row = repo.get(tid)
    return None if row is None else row.state


def _quietly(fn: Callable[..., Any], *args: Any) -> None:
    # The coordinator is killed under it: the connection breaks (no answer to decode).
    with contextlib.suppress(OSError, BufferUnderflow):
        fn(*args, commit=True)
