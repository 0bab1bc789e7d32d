"""poll_arrow() and poll_batch() against real brokers: Arrow batches in offset order with
every column, positions shared with poll() (mixing them skips and repeats nothing), group
members reading and committing through poll_arrow(), and the consume benchmark's smoke run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from bench.servers import SHARED_POSTGRES
from tests.integration.brokers import BrokerProcess
from tierlog import Admin, Consumer, Producer
from tierlog.client import TopicPartition
from tierlog.client.consumer_records import ARROW_RECORDS_SCHEMA

ROOT = Path(__file__).resolve().parents[2]
FAST: dict[str, Any] = {
    "session_timeout_ms": 3000,
    "auto_offset_reset": "earliest",
    "fetch_max_wait_ms": 200,
}


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module: each test has its own topics and groups."""
    return module_broker


def produce(url: str, topic: str, partitions: int, count: int) -> None:
    with Admin(url) as admin:
        admin.create_topic(topic, partitions=partitions)
    with Producer(url, linger_ms=2) as producer:
        for i in range(count):
            producer.send(
                topic,
                b"v%d" % i,
                key=b"k%d" % i,
                partition=i % partitions,
                headers=[("i", b"%d" % i)],
                timestamp_ms=1_700_000_000_000 + i,
            )


def arrow_until(consumer: Consumer, count: int, **kw: Any) -> pa.Table:
    tables: list[pa.Table] = []
    deadline = time.monotonic() + 30
    while sum(t.num_rows for t in tables) < count and time.monotonic() < deadline:
        tables.append(consumer.poll_arrow(0.5, **kw))
    return pa.concat_tables(tables)


def test_poll_arrow_hands_out_every_record_in_offset_order(broker: BrokerProcess) -> None:
    produce(broker.url, "arrows", 3, 300)
    with Consumer(broker.url, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("arrows", p) for p in range(3)])
        table = arrow_until(consumer, 300)
        assert consumer.poll_arrow(0.3).num_rows == 0  # nothing more
        assert consumer.poll_arrow(0.0).schema == ARROW_RECORDS_SCHEMA
        positions = {p: consumer.position(TopicPartition("arrows", p)) for p in range(3)}
    assert table.schema == ARROW_RECORDS_SCHEMA and table.num_rows == 300
    assert positions == {0: 100, 1: 100, 2: 100}
    rows = table.to_pylist()
    assert {r["topic"] for r in rows} == {"arrows"}
    for p in range(3):
        mine = [r for r in rows if r["partition"] == p]
        assert [r["offset"] for r in mine] == list(range(100))
        sent = [i for i in range(300) if i % 3 == p]
        assert [r["value"] for r in mine] == [b"v%d" % i for i in sent]
        assert [r["key"] for r in mine] == [b"k%d" % i for i in sent]
        assert [r["headers"] for r in mine] == [[{"key": "i", "value": b"%d" % i}] for i in sent]
        assert [r["timestamp"].timestamp() * 1000 for r in mine] == [
            1_700_000_000_000 + i for i in sent
        ]


def test_poll_batch_respects_max_records_with_one_partition_per_batch(
    broker: BrokerProcess,
) -> None:
    produce(broker.url, "batched", 2, 200)
    got: list[pa.RecordBatch] = []
    with Consumer(broker.url, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("batched", p) for p in range(2)])
        deadline = time.monotonic() + 30
        while sum(b.num_rows for b in got) < 200 and time.monotonic() < deadline:
            batches = consumer.poll_batch(0.5, max_records=30)
            assert sum(b.num_rows for b in batches) <= 30
            got.extend(batches)
        with pytest.raises(ValueError, match="max_records"):
            consumer.poll_batch(0, max_records=-1)
    for b in got:
        assert len(set(b.column("partition").to_pylist())) == 1
    for p in range(2):
        offsets = [
            o
            for b in got
            if b.column("partition")[0].as_py() == p
            for o in b.column("offset").to_pylist()
        ]
        assert offsets == list(range(100))


def test_mixing_poll_and_poll_arrow_skips_and_repeats_nothing(broker: BrokerProcess) -> None:
    produce(broker.url, "mixed", 2, 400)
    seen: list[tuple[int, int]] = []
    with Consumer(broker.url, auto_offset_reset="earliest", max_poll_records=7) as consumer:
        consumer.assign([TopicPartition("mixed", p) for p in range(2)])
        deadline = time.monotonic() + 30
        turn = 0
        while len(seen) < 400 and time.monotonic() < deadline:
            turn += 1
            if turn % 2:
                seen.extend((r.partition, r.offset) for r in consumer.poll(0.5))
            else:
                t = consumer.poll_arrow(0.5, max_records=11)
                cols = t.column("partition").to_pylist(), t.column("offset").to_pylist()
                seen.extend(zip(*cols, strict=True))
        # A seek drops what was buffered: reading resumes exactly there.
        consumer.seek(TopicPartition("mixed", 0), 150)
        again = consumer.poll_arrow(5.0, max_records=5)
    assert len(seen) == 400 and len(set(seen)) == 400
    for p in range(2):
        assert [o for q, o in seen if q == p] == list(range(200))
    assert again.column("offset").to_pylist() == [150, 151, 152, 153, 154]


def test_group_members_read_and_commit_through_poll_arrow(broker: BrokerProcess) -> None:
    produce(broker.url, "grouped", 4, 400)
    members = [Consumer(broker.url, group_id="arrow-readers", **FAST) for _ in range(2)]
    tables: list[pa.Table] = []
    try:
        for m in members:
            m.subscribe(["grouped"])
        deadline = time.monotonic() + 30
        while sum(t.num_rows for t in tables) < 400 and time.monotonic() < deadline:
            tables.extend(m.poll_arrow(0.2) for m in members)
        for m in members:
            if m.assignment():
                m.commit()
        committed = members[0].committed([TopicPartition("grouped", p) for p in range(4)])
    finally:
        for m in members:
            m.close()
    table = pa.concat_tables(tables)
    pairs = list(
        zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True)
    )
    assert len(pairs) == 400 and len(set(pairs)) == 400
    assert {tp.partition: om.offset if om else None for tp, om in committed.items()} == {
        p: 100 for p in range(4)
    }


def test_consume_bench_smoke(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.client_consume", "--smoke"],
        cwd=ROOT,
        env={**os.environ, SHARED_POSTGRES: database_url},  # a database, not a server
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not a private one" in done.stdout, done.stdout  # bench/servers.py's line
    out = done.stdout
    assert "baseline: raw Arrow fetch (hot)" in out, out
    assert "Consumer.poll() (hot)" in out and "Consumer.poll_arrow() (hot)" in out, out
