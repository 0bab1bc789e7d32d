"""A record tiering cannot write does not stall tiering, and the console shows it (issue 24
item 7). The record (a timestamp of 2^62 ms and one of -2^63 ms, as a Kafka producer could
write before produce checked them) is written straight into a real broker's segment while
the broker is stopped; the broker serves it again after a restart, a `tierlog console`
process shows it on the Messages page and in the live tail (no 500), and a tiering worker
(in this process, downloading from the broker, uploading to moto's S3) tiers the segment
under the documented policy (coldstore/timestamp_policy.py): kept, the timestamp clamped,
the original in a header, one log line and a metric, instead of retrying it forever."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import httpx
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from prometheus_client import REGISTRY

from coldstore.layout import table_uri
from coldstore.object_store import ObjectStoreConfig
from coldstore.timestamp_policy import MAX_WRITABLE_MS, ORIGINAL_TIMESTAMP_HEADER
from ingest.log.index import LogIndex
from ingest.log.local_log import LocalLog, LogConfig
from ingest.log.log_manager import INDEX_DIR
from logformat.frame import encode_frame
from logformat.schema import HEADERS, RECORD_SCHEMA, TIMESTAMP
from metadata.db import make_engine
from metadata.segment_registry import SegmentRegistry
from metadata.types import TopicIdPartition
from tests.integration.brokers import BrokerProcess
from tests.integration.console_browser import ConsoleProcess
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tests.integration.secured import eventually
from tiering.worker import TieringWorker

TOPIC = "bad-stamps"
BAD = [2**62, -(2**63)]
T0 = 1_700_000_000_000


class Env:
    def __init__(self, broker: BrokerProcess, console: ConsoleProcess, s3: ObjectStoreConfig):
        self.broker, self.console, self.s3 = broker, console, s3
        self.topic_id = ""
        self.bad_offsets: list[int] = []


def _frame(stamps: list[int]) -> bytearray:
    n = len(stamps)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(range(n), pa.int32()),
            pa.array(stamps, TIMESTAMP),
            pa.array([b"bad-%d" % i for i in range(n)], pa.binary()),
            pa.array([b"v" * 400] * n, pa.binary()),
            pa.array([None] * n, HEADERS),
        ],
        schema=RECORD_SCHEMA,
    )
    return bytearray(encode_frame(batch))


def _write_straight_into_the_segment(broker: BrokerProcess, topic_id: str) -> list[int]:
    """With the broker stopped: append a frame to the partition's log as the broker would."""
    index = LogIndex(str(broker.data_dir / INDEX_DIR))
    try:
        plog = LocalLog.open(
            str(broker.data_dir / f"{TOPIC}-0"), TOPIC, topic_id, 0, index, LogConfig(1024)
        )
        try:
            [(first, last)] = plog.append([_frame(BAD)], plog.latest_epoch, T0)
        finally:
            plog.close()
    finally:
        index.close()
    return list(range(first, last + 1))


def _produce(broker: BrokerProcess, frames: int) -> None:
    for i in range(frames):  # one frame each: with segment.bytes=1024, a segment each
        broker.produce(TOPIC, [{"key": f"k{i}", "value": "x" * 600, "timestamp": T0 + i}])


@pytest.fixture(scope="module")
def env(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory, moto_s3: MotoServer
) -> Iterator[Env]:
    db = db_factory()
    root = tmp_path_factory.mktemp("bad-record")
    broker = BrokerProcess(db, root / "data-1", 1)
    console: ConsoleProcess | None = None
    try:
        broker.start()
        e = Env(broker, ConsoleProcess(broker.url, root / "console.log"), new_bucket(moto_s3))
        e.topic_id = broker.create_topic(TOPIC, segment_bytes=1024)["id"]
        _produce(broker, 2)
        broker.stop()
        e.bad_offsets = _write_straight_into_the_segment(broker, e.topic_id)
        broker.start(wait=False)  # the console starts meanwhile
        console = e.console.start()
        broker.wait_ready()
        _produce(broker, 3)  # the bad frame's segment rolls, the high watermark passes it
        yield e
    finally:
        if console is not None:
            console.stop()
        broker.stop()


def test_the_broker_serves_the_record_and_the_console_renders_it(env: Env) -> None:
    got = {r["offset"]: r["timestamp"] for r in env.broker.fetch_all(TOPIC)}
    assert [got[o] for o in env.bad_offsets] == BAD
    url = f"{env.console.url}/messages?topic={TOPIC}&partition=0&position=beginning"
    page = httpx.get(url, timeout=30)
    assert page.status_code == 200, page.text[-2000:]
    assert f"out of range ({2**62} ms)" in page.text and "bad-0" in page.text
    tail = httpx.get(f"{env.console.url}/messages/tail?topic={TOPIC}&next=0:0", timeout=30)
    assert tail.status_code == 200, tail.text[-2000:]
    assert f"out of range ({-(2**63)} ms)" in tail.text


def _metric(topic: str) -> float:
    value = REGISTRY.get_sample_value(
        "tierlog_tiering_bad_records_total",
        {"topic": topic, "reason": "timestamp_out_of_range"},
    )
    return value or 0.0


def test_tiering_keeps_the_record_clamped_and_reports_it(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    engine = make_engine(env.broker.database_url, pool_size=2)
    worker = TieringWorker(engine, env.s3, "bad-record-worker")
    registry = SegmentRegistry(engine)
    tp = TopicIdPartition(env.topic_id, 0)
    before = _metric(TOPIC)

    def tiered_past_the_bad_record() -> bool:
        worker.run_once()
        tiered = [s for s in registry.segments(tp) if s.state == "tiered"]
        return any(s.end_offset > max(env.bad_offsets) for s in tiered)

    try:
        with caplog.at_level(logging.WARNING, logger="tiering.batch"):
            eventually(tiered_past_the_bad_record, timeout=60)
    finally:
        worker.close()
        engine.dispose()
    assert _metric(TOPIC) - before == len(BAD)
    lines = [r for r in caplog.records if "timestamp the cold tier cannot hold" in r.message]
    assert len(lines) == 1 and getattr(lines[0], "records", None) == len(BAD)
    table = DeltaTable(table_uri(env.s3, TOPIC), storage_options=env.s3.storage_options())
    data = table.to_pyarrow_table()
    micros = data.column("timestamp").cast(pa.int64()).to_pylist()  # delta-rs reads µs
    rows = {r["offset"]: (r, us) for r, us in zip(data.to_pylist(), micros, strict=True)}
    for offset, original in zip(env.bad_offsets, BAD, strict=True):
        row, us = rows[offset]  # kept: nothing is lost
        assert us // 1000 == (MAX_WRITABLE_MS if original > 0 else 0)
        assert {"key": ORIGINAL_TIMESTAMP_HEADER, "value": str(original).encode()} in row["headers"]
