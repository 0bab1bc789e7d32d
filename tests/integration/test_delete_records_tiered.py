"""DeleteRecords on a tiered topic (issue 30), from confluent-kafka's AdminClient, on real
broker processes, a fetch node, real Postgres and moto's S3, with the tiering and compaction
workers in this process. The log start is cross-tier, as in Kafka's tiered storage: a start
inside the cold tier makes cold reads below it OFFSET_OUT_OF_RANGE (broker, fetch node; a
Kafka consumer from the beginning, a search and the Spark source's live plan start at it,
ListOffsets EARLIEST and by timestamp answer it), survives in Postgres, and the compaction
worker removes the cold files wholly below it from the manifest and the Delta table; a start
inside the hot tier is taken by every replica."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pyarrow.compute as pc
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as Partition
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import Engine

from coldstore.layout import table_uri
from coldstore.object_store import ObjectStoreConfig
from compaction.jobs import Settings
from compaction.worker import CompactionWorker
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.log_starts import LogStarts
from metadata.types import TopicIdPartition
from spark_tables.options import SourceOptions
from spark_tables.scan import log_ends
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for
from tests.integration.fetch_nodes import FetchNodeProcess, s3_env
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tiering.worker import TieringWorker

TOPIC = "drt"
N = 90  # records, three to a produce request; segments of 4 KiB hold a few requests each


@pytest.fixture(scope="module")
def world(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory, moto_s3: MotoServer
) -> Iterator[tuple[Cluster, FetchNodeProcess, ObjectStoreConfig, Engine, str]]:
    """Two brokers with Kafka listeners; a topic whose first segments are tiered (and gone
    from the brokers' disks), its later ones hot; a fetch node."""
    db = db_factory()
    bucket = new_bucket(moto_s3)
    tmp = tmp_path_factory.mktemp("drt")
    engine = make_engine(db)
    node: FetchNodeProcess | None = None
    with pytest.MonkeyPatch.context() as monkeypatch:
        for k, v in s3_env(bucket).items():
            monkeypatch.setenv(k, v)
        cluster = Cluster(db, tmp, 2, kafka=True).start()
        try:
            tid = _tiered_topic(cluster, engine, bucket)
            node = FetchNodeProcess(db, tmp / "fetch.log", s3_env(bucket)).start()
            yield cluster, node, bucket, engine, tid
        finally:
            if node is not None:
                node.stop()
            cluster.stop()
            engine.dispose()


def _tiered_topic(cluster: Cluster, engine: Engine, bucket: ObjectStoreConfig) -> str:
    configs = {"segment.bytes": 4096, "local.retention.ms": 1000}
    r = cluster.any().http.post(
        "/topics",
        json={"name": TOPIC, "partitions": 1, "replication_factor": 2, "configs": configs},
    )
    assert r.status_code == 201, r.text
    tid = str(r.json()["id"])
    wait_for("replicas in sync", lambda: len(cluster.partition(TOPIC)["isr"]) == 2)
    for i in range(0, N, 3):
        cluster.produce(TOPIC, [{"value": f"v{j:03d}" + "." * 300} for j in range(i, i + 3)])
    manifest, tp = ColdManifest(engine), TopicIdPartition(tid, 0)
    worker = TieringWorker(engine, bucket, "drt-tiering")
    try:

        def tiered_far() -> bool:
            worker.run_once()
            return (manifest.tiered_end_offset(tp) or 0) >= N // 2

        wait_for("half the topic tiered", tiered_far, timeout=90, every=0.3)
    finally:
        worker.close()
    wait_for("tiered segments deleted locally", lambda: _hot_start(cluster) >= N // 4)
    return tid


def _hot_start(cluster: Cluster) -> int:
    return int(cluster.partition(TOPIC)["hot"]["start"])


def _log_start_metric(broker: BrokerProcess) -> float | None:
    for family in text_string_to_metric_families(broker.http.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "tierlog_log_start_offset" and sample.labels == {
                "topic": TOPIC,
                "partition": "0",
            }:
                return sample.value
    return None


def _first_consumed(bootstrap: str) -> tuple[int, int]:
    """The first offset a consumer from the beginning reads, and the low watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"drt-{uuid.uuid4().hex}"})
    consumer.assign([Partition(TOPIC, 0, OFFSET_BEGINNING)])
    try:
        first = wait_for("a record", lambda: _polled(consumer), timeout=30, every=0)
        low, _ = consumer.get_watermark_offsets(Partition(TOPIC, 0), timeout=10)
    finally:
        consumer.close()
    return first, low


def _polled(consumer: Consumer) -> int | None:
    msg = consumer.poll(1.0)
    return None if msg is None or msg.error() is not None else msg.offset() + 1  # 0 is falsy


def _refused_below(http: httpx.Client, start: int) -> dict[str, Any] | None:
    r = http.get(f"/topics/{TOPIC}/partitions/0/records", params={"offset": start - 1})
    return r.json() if r.status_code == 416 else None


def _searched(http: httpx.Client, value: str) -> list[int]:
    """The offsets a search from offset 0 finds (GET /topics/{t}/search, ndjson)."""
    params = {"value": value, "max_hits": 1000}
    with http.stream("GET", f"/topics/{TOPIC}/search", params=params) as r:
        assert r.status_code == 200, r.read()
        lines = [orjson.loads(line) for line in r.iter_lines() if line]
    return [int(x["offset"]) for x in lines if x["type"] == "hit"]


def _delete(admin: AdminClient, offset: int) -> int:
    [future] = admin.delete_records([Partition(TOPIC, 0, offset)]).values()
    return int(future.result(60).low_watermark)


def test_a_start_in_the_cold_tier_hides_and_then_removes_the_records_below(
    world: tuple[Cluster, FetchNodeProcess, ObjectStoreConfig, Engine, str],
) -> None:
    cluster, node, bucket, engine, tid = world
    tp = TopicIdPartition(tid, 0)
    files = ColdManifest(engine).files(tp)
    assert len(files) >= 3 and files[0].base_offset == 0
    start = files[1].base_offset + 1  # inside the second file: the first is wholly below
    assert start < _hot_start(cluster)  # a cold offset

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    assert _delete(admin, start) == start
    assert LogStarts(engine).get(tp) == start  # kept where every node and worker reads it

    leader = cluster.leader(TOPIC)
    for http in (leader.http, node.http):  # the fetch node's cold range may be a second old
        doc = wait_for("416 below the new start", lambda h=http: _refused_below(h, start))
        assert doc["error_code"] == "OFFSET_OUT_OF_RANGE" and doc["log_start_offset"] == start
        r = http.get(f"/topics/{TOPIC}/partitions/0/records", params={"offset": start})
        assert r.status_code == 200 and r.json()["records"][0]["offset"] == start
        found = _searched(http, "v0")  # values v000..v099: cold and hot ones match
        assert found and min(found) == start
        for at in ("earliest", "0"):  # the log start; the first offset at or after time 0
            r = http.get(f"/topics/{TOPIC}/partitions/0/offsets", params={"at": at})
            assert r.json()["offset"] == start, (at, r.text)
    assert cluster.partition(TOPIC)["log_start_offset"] == start  # describe
    # The Spark source reading brokers and cold files starts there too.
    opts = SourceOptions(TOPIC, bucket, broker_url=leader.url, include_hot=True)
    assert log_ends(opts, live=True)[0].start == start
    assert _first_consumed(cluster.bootstrap()) == (start + 1, start)  # (offset + 1, low)

    # The compaction worker removes the file wholly below, from the Delta table as well.
    settings = Settings(min_grace_ms=0, merge_min_files=1000)
    worker = CompactionWorker(engine, bucket, "drt-compaction", settings)
    try:
        assert worker.run_once().expired_files == 1
    finally:
        worker.close()
    left = ColdManifest(engine).files(tp)
    assert [f.id for f in left][:1] == [files[1].id]  # the file holding the start stays
    table = DeltaTable(table_uri(bucket, TOPIC), storage_options=bucket.storage_options())
    offsets = table.to_pyarrow_table(columns=["offset"]).column("offset")
    assert pc.min(offsets).as_py() == files[1].base_offset  # the removed file's rows are gone


def test_a_start_in_the_hot_tier_is_taken_by_every_replica(
    world: tuple[Cluster, FetchNodeProcess, ObjectStoreConfig, Engine, str],
) -> None:
    cluster, _node, _bucket, engine, tid = world
    hw = int(cluster.partition(TOPIC)["high_watermark"])
    start = hw - 2
    assert start > _hot_start(cluster)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    assert _delete(admin, start) == start
    assert _delete(admin, start - 5) == start  # never backwards
    assert LogStarts(engine).get(TopicIdPartition(tid, 0)) == start
    for broker in cluster.brokers.values():
        wait_for("the replica's log start", lambda b=broker: _log_start_metric(b) == start)
    doc = wait_for("416 below it", lambda: _refused_below(cluster.leader(TOPIC).http, start))
    assert doc["log_start_offset"] == start
    assert _first_consumed(cluster.bootstrap()) == (start + 1, start)
