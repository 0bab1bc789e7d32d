"""The issue's replay test: a topic of a million records, more than 90% of them only in S3,
replayed from offset 0 in order, every record exactly once and byte-equal to a deterministic
generator; through a broker (cold reads below its local log start, then its hot log) and
through a `tierlog fetch` node. Select it with `-m replay`; it runs in the default suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from coldstore.object_store import ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.types import TopicIdPartition
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for
from tests.integration.fetch_nodes import FetchNodeProcess, s3_env
from tests.integration.replay_data import arrow_body, check, records
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tiering.worker import TieringWorker

pytestmark = pytest.mark.replay

ARROW = "application/vnd.apache.arrow.stream"
N = 1_000_000
BATCH = 50_000


def replay(http: httpx.Client, end: int) -> int:
    """Read [0, end) with Arrow fetches, checking every batch; returns the request count."""
    offset, requests = 0, 0
    while offset < end:
        r = http.get(
            "/topics/replay/partitions/0/records",
            params={"offset": offset, "max_records": 100_000, "max_bytes": 8 << 20},
            headers={"accept": ARROW},
        )
        assert r.status_code == 200, r.text
        table = pa.ipc.open_stream(r.content).read_all()
        assert table.num_rows > 0
        check(table, offset)  # in order, no gap, no duplicate, byte-equal
        offset += table.num_rows
        assert int(r.headers["x-tierlog-next-offset"]) == offset
        assert int(r.headers["x-tierlog-log-start-offset"]) == 0
        requests += 1
    return requests


@pytest.fixture
def topic(
    fresh_db: str, tmp_path: Path, s3_bucket: ObjectStoreConfig, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[BrokerProcess, FetchNodeProcess]]:
    env = s3_env(s3_bucket)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    broker = BrokerProcess(fresh_db, tmp_path / "data-1").start()
    node: FetchNodeProcess | None = None
    engine = make_engine(fresh_db)
    try:
        tid = broker.create_topic(
            "replay",
            segment_bytes=4 << 20,
            local_retention_ms=1000,
            max_message_bytes=16 << 20,
        )["id"]
        for lo in range(0, N, BATCH):
            r = broker.http.post(
                "/topics/replay/records",
                params={"acks": "1"},
                content=arrow_body(records(lo, lo + BATCH)),
                headers={"content-type": ARROW},
            )
            assert r.status_code == 200, r.text
        worker = TieringWorker(engine, s3_bucket, "replay-worker")
        manifest = ColdManifest(engine)
        try:

            def cold_enough() -> bool:
                worker.run_once()
                return (manifest.tiered_end_offset(TopicIdPartition(tid, 0)) or 0) >= N * 0.9

            wait_for("90% tiered", cold_enough, timeout=120, every=0.5)
        finally:
            worker.close()

        def hot_start() -> int:
            return int(broker.http.get("/topics/replay").json()["partitions"][0]["hot"]["start"])

        wait_for("tiered segments deleted locally", lambda: hot_start() >= N * 0.9, timeout=30)
        node = FetchNodeProcess(fresh_db, tmp_path / "fetch.log", env).start()
        yield broker, node
    finally:
        engine.dispose()
        if node is not None:
            node.stop()
        broker.stop()


def test_replay_a_million_records_mostly_from_s3(
    topic: tuple[BrokerProcess, FetchNodeProcess],
) -> None:
    broker, node = topic
    p = broker.http.get("/topics/replay").json()["partitions"][0]
    assert p["high_watermark"] == N and p["log_start_offset"] == 0
    assert p["hot"]["start"] >= 0.9 * N  # >= 90% of the records live only in S3
    assert replay(node.http, N) >= 10
    assert replay(broker.http, N) >= 10
    # Both really read the cold part from S3 (not, say, from a broker's disk).
    for http in (node.http, broker.http):
        served = cold_records(http.get("/metrics").text)
        assert 0.9 * N <= served <= N, served


def cold_records(metrics: str) -> float:
    name = "tierlog_cold_fetch_records_total{"
    return sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(name))
