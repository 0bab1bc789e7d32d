"""spark.read.format("tierlog") with includeHot, against real broker processes, a tiering
worker, local Spark, moto's S3 server and Postgres; and the fixtures the Spark tests share:
rows_of and LiveTopic, a one-broker cluster whose topic a tiering worker archives (the suite's
one SparkSession, `spark`, is tests/integration/conftest.py's).

The scans of a cold archive, with their pruning, are in test_spark_source_archive.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from coldstore.object_store import ObjectStore, ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.types import TopicIdPartition
from spark_tables import report, store_options
from tests.integration.cluster import Cluster, wait_for
from tests.integration.s3 import MotoServer, config_for, moto_s3_fixture  # noqa: F401
from tiering.worker import TieringWorker

T0 = 1_700_000_000_000


# -- fixtures shared with test_spark_streaming.py ---------------------------------------------


def rows_of(df: DataFrame) -> list[tuple[Any, ...]]:
    """(partition, offset, ts ms, key, value, headers) per row, in the DataFrame's order."""
    out = []
    for r in df.selectExpr(
        "partition", "offset", "unix_millis(timestamp) AS ts", "key", "value", "headers"
    ).collect():
        headers = None if r.headers is None else [(h.key, bytes(h.value)) for h in r.headers]
        key = bytes(r.key) if isinstance(r.key, bytearray) else r.key
        value = bytes(r.value) if isinstance(r.value, bytearray) else r.value
        out.append((r.partition, r.offset, r.ts, key, value, headers))
    return out


class LiveTopic:
    """A real one-broker cluster with a topic of tiny segments, and a tiering worker."""

    def __init__(self, db_url: str, root: Path, store: ObjectStoreConfig, name: str, n: int):
        root.mkdir(parents=True, exist_ok=True)
        self.cluster = Cluster(db_url, root, 1).start()
        self.engine = make_engine(db_url)
        self.store, self.name, self.partitions = store, name, n
        self.broker = self.cluster.any()
        r = self.broker.http.post(
            "/topics",
            json={
                "name": name,
                "partitions": n,
                "replication_factor": 1,
                "configs": {"segment.bytes": 2048},
            },
        )
        assert r.status_code == 201, r.text
        self.topic_id = str(r.json()["id"])
        self.worker = TieringWorker(self.engine, store, f"w-{name}")
        self.manifest = ColdManifest(self.engine)
        self.expected: dict[tuple[int, int], tuple[Any, ...]] = {}
        self._next = 0

    @property
    def url(self) -> str:
        return self.broker.url

    def produce(self, partition: int, count: int) -> None:
        records: list[dict[str, Any]] = []
        for _ in range(count):
            i = self._next
            self._next += 1
            records.append(
                {
                    "partition": partition,
                    "key": f"k{i}",
                    "value": {"i": i, "p": partition},
                    "timestamp": T0 + i,
                    "headers": {"h": f"v{i}"},
                }
            )
        for rec, off in zip(records, self.broker.produce(self.name, records), strict=True):
            value = json.dumps(rec["value"], separators=(",", ":")).encode()
            self.expected[(partition, off["offset"])] = (
                rec["key"].encode(),
                value,
                rec["timestamp"],
                [("h", rec["headers"]["h"].encode())],
            )

    def cold_end(self, partition: int) -> int:
        return self.manifest.tiered_end_offset(TopicIdPartition(self.topic_id, partition)) or 0

    def high_watermark(self, partition: int) -> int:
        return int(self.cluster.partition(self.name, partition)["high_watermark"])

    def tier_until(self, partition: int, at_least: int) -> int:
        """Tier until the partition's cold end reaches `at_least`; returns the cold end."""

        def done() -> bool:
            self.worker.run_once()
            return self.cold_end(partition) >= at_least

        wait_for(f"{self.name}-{partition} tiered to {at_least}", done, timeout=60, every=0.2)
        return self.cold_end(partition)

    def options(self, **more: str) -> dict[str, str]:
        return {**store_options(self.store), "brokerUrl": self.url, **more}

    def close(self) -> None:
        self.worker.close()
        self.cluster.stop()
        self.engine.dispose()


# -- includeHot: real brokers and a tiering worker ---------------------------------------------


@pytest.fixture(name="live")
def live_fixture(fresh_db: str, tmp_path: Path, moto_s3: MotoServer) -> Iterator[LiveTopic]:
    store = config_for(moto_s3.endpoint, f"live-{uuid.uuid4().hex[:12]}", "l")
    ObjectStore(store).ensure_bucket()
    topic = LiveTopic(fresh_db, tmp_path / "cluster", store, "clicks", 2)
    yield topic
    topic.close()


def test_include_hot_sees_fresh_records_exactly_once_across_the_seam(
    spark: SparkSession, live: LiveTopic, tmp_path: Path
) -> None:
    for _ in range(4):
        for p in (0, 1):
            live.produce(p, 30)
    ends = {p: live.tier_until(p, 30) for p in (0, 1)}
    live.produce(0, 7)  # a moment ago: certainly not tiered
    hws = {p: live.high_watermark(p) for p in (0, 1)}
    assert all(0 < ends[p] < hws[p] for p in (0, 1))
    report_dir = tmp_path / "report"
    df = spark.read.format("tierlog").options(**live.options(reportDir=str(report_dir)))
    rows = rows_of(df.option("includeHot", "true").load("clicks"))
    got = sorted((p, o) for p, o, *_ in rows)
    assert got == sorted(live.expected)  # every record, no duplicate at the seam
    for p, o, ts, key, value, headers in rows:
        assert (key, value, ts, headers) == live.expected[(p, o)]
    (plan,) = [e for e in report.read(report_dir) if e["kind"] == "plan"]
    assert sorted(plan["hot"]) == [[p, ends[p], hws[p]] for p in (0, 1)]
    cold_only = spark.read.format("tierlog").options(**live.options()).load("clicks")
    assert sorted(
        (r.partition, r.offset) for r in cold_only.select("partition", "offset").collect()
    ) == [k for k in sorted(live.expected) if k[1] < ends[k[0]]]
