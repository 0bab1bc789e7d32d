"""The producer's bulk paths (send_batch, send_table) against a real broker: Kafka's
partitions, order within a partition (also mixed with send()), idempotent retries when
answers are lost, and errors that fail only their own records."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from bench.servers import SHARED_POSTGRES
from logformat.partitioner import partition_for_key
from tests.integration.brokers import BrokerProcess
from tests.integration.test_client_faults import LosingTransport
from tierlog import ApiError, Producer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module: each test has its own topics."""
    return module_broker


def stored(broker: BrokerProcess, topic: str, partition: int) -> list[str]:
    return [str(r["value"]) for r in broker.fetch_all(topic, partition, value_format="string")]


def test_send_batch_keeps_kafka_partitions_and_order(broker: BrokerProcess) -> None:
    broker.create_topic("bulk-order", partitions=3)
    n = 3000
    values = [b"v%d" % i for i in range(n)]
    keys = [None if i % 4 == 0 else b"key-%d" % (i % 11) for i in range(n)]
    headers = [{"i": str(i)} if i % 5 == 0 else None for i in range(n)]
    # Small batches: many requests per partition, several in flight at once.
    with Producer(broker.url, batch_size=2000, max_request_size=4000) as producer:
        first = producer.send("bulk-order", b"before", key=b"key-1")
        delivery = producer.send_batch("bulk-order", values, keys=keys, headers=headers)
        last = producer.send("bulk-order", b"after", key=b"key-1")
        producer.flush(60)
        metadata = delivery.result(0)
    assert len(delivery) == n and delivery.exceptions(0) == {}
    for key, md in zip(keys, metadata, strict=True):
        if key is not None:
            assert md.partition == partition_for_key(key, 3)
    assert delivery[7].result(0) == metadata[7]
    by_partition: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for i, md in enumerate(metadata):
        by_partition[md.partition].append(f"v{i}")
    p1 = partition_for_key(b"key-1", 3)
    assert first.result(0).partition == last.result(0).partition == p1
    for p in range(3):
        want = by_partition[p]
        if p == p1:  # send() before and after the bulk call: order kept around it
            want = ["before", *want, "after"]
        assert stored(broker, "bulk-order", p) == want
    null_partitions = {md.partition for key, md in zip(keys, metadata, strict=True) if not key}
    assert len(null_partitions) > 1  # null keys stick per batch, then move on
    md = metadata[5]
    got = broker.fetch("bulk-order", md.partition, md.offset, max_records=1, value_format="string")
    assert got["records"][0]["headers"] == {"i": "5"}


def test_send_table_retries_lost_answers_without_duplicates(broker: BrokerProcess) -> None:
    broker.create_topic("bulk-idem", partitions=2)
    transport = LosingTransport()
    n = 2000
    table = pa.table(
        {
            "value": [f"t{i}" for i in range(n)],
            "key": [f"k{i % 9}".encode() for i in range(n)],
            "timestamp": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()),
        }
    )
    with Producer(
        broker.url, transport=transport, batch_size=3000, max_request_size=6000
    ) as producer:
        delivery = producer.send_table("bulk-idem", table)
        producer.flush(60)
    assert transport.lost > 5
    metadata = delivery.result(0)
    sent: dict[int, list[str]] = {0: [], 1: []}
    for i, md in enumerate(metadata):
        assert md.timestamp == 1_700_000_000_000 + i
        sent[md.partition].append(f"t{i}")
    for p in range(2):
        assert stored(broker, "bulk-idem", p) == sent[p]  # each once, in order
    # Retried batches were answered with their original offsets.
    for i in (0, 999, 1999):
        md = metadata[i]
        doc = broker.fetch("bulk-idem", md.partition, md.offset, max_records=1)
        assert doc["records"][0]["value"] == f"t{i}"


def test_bulk_errors_fail_only_their_own_records(broker: BrokerProcess) -> None:
    broker.create_topic("bulk-errors", partitions=2)
    table = pa.table(
        {
            "value": [b"ok0", b"x" * 5000, b"ok2", b"ok3"],
            "partition": pa.array([0, 1, 7, None], pa.int32()),
        }
    )
    with Producer(broker.url, max_request_size=4000, batch_size=1000) as producer:
        delivery = producer.send_table("bulk-errors", table)
        producer.flush(30)
        errors = delivery.exceptions(0)
        assert sorted(errors) == [1, 2]
        assert isinstance(errors[1], ApiError) and errors[1].name == "MESSAGE_TOO_LARGE"
        assert isinstance(errors[2], ApiError) and errors[2].name == "UNKNOWN_TOPIC_OR_PARTITION"
        with pytest.raises(ApiError):
            delivery.result(0)
        assert delivery[0].result(0).partition == 0
        assert delivery[3].exception(0) is None
        # An unknown topic is refused at the call, as send() refuses it.
        with pytest.raises(ApiError, match="UNKNOWN_TOPIC"):
            producer.send_batch("no-such-topic-bulk", [b"a", b"b"])
        # Bad input is refused at once, nothing queued.
        with pytest.raises(ValueError, match="'value' column"):
            producer.send_table("bulk-errors", pa.table({"payload": [b"a"]}))
        with pytest.raises(TypeError, match="'value' must be binary"):
            producer.send_table("bulk-errors", pa.table({"value": [1, 2]}))
        with pytest.raises(ValueError, match="2 keys for 1 values"):
            producer.send_batch("bulk-errors", [b"a"], keys=[b"k", b"k"])
    assert stored(broker, "bulk-errors", 0) == ["ok0"] + (
        ["ok3"] if delivery[3].result(0).partition == 0 else []
    )


def test_client_bench_smoke(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.client", "--smoke"],
        cwd=ROOT,
        env={**os.environ, SHARED_POSTGRES: database_url},  # a database, not a server
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not a private one" in done.stdout, done.stdout  # bench/servers.py's line
    for setup in ("1 broker", "3 brokers RF=3"):
        for case in ("raw Arrow HTTP (baseline)", "send() defaults", "send_batch", "send_table"):
            assert any(line.startswith(f"{setup:<16} {case}") for line in done.stdout.splitlines())
    # Cold data (tiered to S3, gone from the hot tier) read through the broker's cold path.
    for case in (
        "baseline: raw Arrow fetch (cold)",
        "Consumer.poll() (cold)",
        "poll_arrow() (cold)",
    ):
        assert any(
            line.startswith("1 broker, cold") and case in line for line in done.stdout.splitlines()
        ), done.stdout
    assert "every case checked that all its records arrived" in done.stdout
