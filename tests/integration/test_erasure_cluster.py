"""Issue 31's headline: erase a key on a real three-broker cluster with S3 (moto over HTTP),
tiering and compaction workers (in-process, driven pass by pass) and a fetch node process.

The key lives in several cold files and in hot segments, sealed and active. After `done`: no
read path returns it (HTTP fetch on every broker and on the fetch node, a confluent-kafka
consumer from offset 0, search, deltalake's current version, Spark's `tierlog` source with
includeHot on the suite's one SparkSession); every other record keeps its offset; the
replicas' segment files are byte-identical; after the grace period no S3 object and no local
segment holds it (read directly); the audit record is complete.

The same again with the leader killed -9 just after the request is accepted, and with a
`tierlog compaction` process killed -9 mid-rewrite: new files uploaded and staged, the Delta
commit not made (held there by the crash-test setting --erasure-commit-pause-ms). The next
pass (in-process) finishes the erasure, and no file the killed one left is in the table or,
after the grace period, in the bucket. One stack for the module."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from sqlalchemy.engine import Engine

from coldstore.layout import table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from compaction.jobs import Settings
from compaction.worker import CompactionWorker
from ingest.cleaner.log_cleaner import segment_frames
from logformat.frame import decode_records
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.erasures import READER_FILE_LIST_TTL_S
from metadata.types import TopicIdPartition
from spark_tables import store_options
from tests.integration.cluster import Cluster, wait_for
from tests.integration.fetch_nodes import FetchNodeProcess, s3_env
from tests.integration.kafka_clients import consume
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tiering.worker import TieringWorker
from tierlog.devstack.parent_watch import child_env

ALICE = "alice"
PAUSED = "erasure paused before its Delta commit"
COLD_BATCHES, HOT_BATCHES = 6, 6
# a stale file list's whole life (well beyond COLD_SETTLE_MS, when the request is done)
PLAIN_GRACE_MS = int(READER_FILE_LIST_TTL_S * 1000)


class Stack:
    def __init__(
        self,
        cluster: Cluster,
        node: FetchNodeProcess,
        engine: Engine,
        bucket: ObjectStoreConfig,
        db: str,
        root: Path,
    ) -> None:
        self.cluster, self.node, self.engine, self.bucket = cluster, node, engine, bucket
        self.db, self.root = db, root
        self.store = ObjectStore(bucket)
        self.tiering = TieringWorker(engine, bucket, "erase-tiering")
        self.compaction = CompactionWorker(
            engine,
            bucket,
            "erase-compaction",
            Settings(min_grace_ms=0, target_file_bytes=1 << 20, merge_min_files=1000),
        )

    def close(self) -> None:
        self.tiering.close()
        self.compaction.close()
        self.store.close()


@pytest.fixture(scope="module")
def stack(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory, moto_s3: MotoServer
) -> Iterator[Stack]:
    db = db_factory()
    bucket = new_bucket(moto_s3)
    root = tmp_path_factory.mktemp("erase-cluster")
    engine = make_engine(db)
    cluster = Cluster(db, root, 3, env=s3_env(bucket), kafka=True)
    node: FetchNodeProcess | None = None
    s: Stack | None = None
    try:
        cluster.start()
        node = FetchNodeProcess(db, root / "fetch.log", s3_env(bucket)).start()
        s = Stack(cluster, node, engine, bucket, db, root)
        yield s
    finally:
        if s is not None:
            s.close()
        if node is not None:
            node.stop()
        cluster.stop()
        engine.dispose()


def _batch(i: int) -> list[dict[str, Any]]:
    """Four records, one of them alice's: her records are spread over every segment."""
    rows = [{"key": f"u{i}-{j}", "value": f"value {i}-{j} " * 20} for j in range(3)]
    return [*rows, {"key": ALICE, "value": f"alice's secret {i}"}]


def _fill(s: Stack, topic: str, grace_ms: int) -> str:
    """Cold files, then sealed hot segments and the active one, all holding alice."""
    tid = str(
        s.cluster.create_topic(
            topic,
            segment_bytes=2048,
            file_delete_delay_ms=grace_ms,  # the grace period, short for the test
            local_retention_ms=3_600_000,  # tiered segments stay: the key is in both tiers
        )["id"]
    )
    for i in range(COLD_BATCHES):
        s.cluster.produce(topic, _batch(i))
    tp, manifest = TopicIdPartition(tid, 0), ColdManifest(s.engine)

    def tiered() -> bool:
        s.tiering.run_once()
        return len(manifest.files(tp)) >= 3

    wait_for("several cold files", tiered, timeout=90, every=0.3)
    for i in range(COLD_BATCHES, COLD_BATCHES + HOT_BATCHES):
        s.cluster.produce(topic, _batch(i))
    return tid


def _fetch_all(http: httpx.Client, topic: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        r = http.get(
            f"/topics/{topic}/partitions/0/records",
            params={"offset": offset, "max_records": 10_000},
        )
        assert r.status_code == 200, r.text
        doc = r.json()
        out.extend(doc["records"])
        if doc["next_offset"] >= doc["high_watermark"] or doc["next_offset"] <= offset:
            return out
        offset = doc["next_offset"]


def _view(records: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    return [(r["offset"], r["key"], r["value"]) for r in records]


def _search(http: httpx.Client, topic: str) -> list[dict[str, Any]]:
    with http.stream("GET", f"/topics/{topic}/search", params={"key": ALICE}) as r:
        assert r.status_code == 200, r.read()
        lines = [orjson.loads(line) for line in r.iter_lines() if line]
    return [x for x in lines if x["type"] == "hit"]


def _disk_keys(data_dir: Path, topic: str) -> list[bytes | None]:
    keys: list[bytes | None] = []
    for path in sorted((data_dir / f"{topic}-0").glob("*.log")):
        for _, frame in segment_frames(str(path)):
            keys.extend(decode_records(frame).column(2).to_pylist())
    return keys


def _objects(s: Stack, topic: str) -> set[str]:
    """The topic's data objects in the bucket (listed, not read)."""
    return {
        k for k, _ in s.store.list(f"{s.bucket.key('topics', topic)}/") if k.endswith(".parquet")
    }


def _object_keys(s: Stack, topic: str) -> dict[str, list[bytes | None]]:
    """Every data object's record keys, read from the bucket."""
    out: dict[str, list[bytes | None]] = {}
    for key in sorted(_objects(s, topic)):
        table = pq.read_table(pa.BufferReader(s.store.get(key)), columns=["key"])
        out[key] = table.column("key").to_pylist()
    return out


def _bucket_keys(s: Stack, topic: str) -> list[bytes | None]:
    return [k for keys in _object_keys(s, topic).values() for k in keys]


def _spark_view(spark: SparkSession, s: Stack, topic: str) -> list[tuple[int, str]]:
    """(offset, key) of every record Spark's tierlog source reads, cold files and hot log."""
    opts = {**store_options(s.bucket), "brokerUrl": s.cluster.any().url, "includeHot": "true"}
    df = spark.read.format("tierlog").options(**opts).load(topic)
    return sorted((r.offset, bytes(r.key).decode()) for r in df.select("offset", "key").collect())


def _kill_compaction_mid_rewrite(s: Stack, topic: str, eid: str) -> None:
    """Once every replica erased its hot log (so the worker's first pass goes straight to the
    cold rewrite, before any merge), run `tierlog compaction` held before its Delta commit,
    and kill -9 it there."""

    def hot_done() -> bool:
        hot = s.cluster.any().http.get(f"/topics/{topic}/erasures/{eid}").json()["hot"]
        return len(hot) == len(s.cluster.brokers) and all(r["done"] for r in hot.values())

    wait_for("every replica's hot erasure", hot_done, timeout=120, every=0.3)
    log_path = s.root / f"compaction-{topic}.log"
    env = {**os.environ, **s3_env(s.bucket), "TIERLOG_DATABASE_URL": s.db}
    argv = [sys.executable, "-m", "tierlog", "compaction", "--poll-ms", "200"]
    argv += ["--min-grace-ms", "0", "--erasure-commit-pause-ms", "600000"]
    with log_path.open("ab") as out:
        proc = subprocess.Popen(argv, env=child_env(env), stdout=out, stderr=subprocess.STDOUT)
    try:

        def paused() -> bool:
            assert proc.poll() is None, log_path.read_text(errors="replace")[-4000:]
            return PAUSED in log_path.read_text(errors="replace")

        wait_for("the compaction worker held before its Delta commit", paused, timeout=120)
        assert "cold erasure done" not in log_path.read_text(errors="replace")
    finally:
        proc.kill()  # SIGKILL
        proc.wait(30)


def _no_orphans(s: Stack, topic: str, tid: str) -> None:
    """The Delta table's files are exactly the manifest's committed ones; after the grace
    period the bucket holds no other data object (a killed rewrite's uploads are gone)."""
    root = s.bucket.key("topics", topic)
    delta = DeltaTable(table_uri(s.bucket, topic), storage_options=s.bucket.storage_options())
    in_table = {uri.split("/", 3)[3] for uri in delta.file_uris()}  # s3://bucket/<key>
    assert all(key.startswith(f"{root}/") for key in in_table)
    committed = {f.object_key for f in ColdManifest(s.engine).files(TopicIdPartition(tid, 0))}
    assert in_table == committed

    def swept() -> bool:
        s.compaction.run_once()
        return _objects(s, topic) == in_table

    wait_for("only the table's files in the bucket", swept, timeout=60, every=0.5)


def _wait_done(s: Stack, topic: str, eid: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        # The fetch node reads just before each pass, so when the cold rewrite commits it
        # holds a list of the replaced files, fresh for its whole cache TTL: only being told
        # of the rewrite keeps it from serving them at `done` (the objects outlive the grace).
        _fetch_all(s.node.http, topic)
        s.compaction.run_once()
        doc = dict(s.cluster.any().http.get(f"/topics/{topic}/erasures/{eid}").json())
        assert doc["state"] in ("pending", "running", "done"), doc
        return doc if doc["state"] == "done" else None

    return wait_for(f"erasure {eid} done", done, timeout=180, every=0.5)


@pytest.mark.parametrize(
    "kill", ["", "leader", "compaction"], ids=["plain", "leader-killed", "compaction-killed"]
)
def test_erased_everywhere(spark: SparkSession, stack: Stack, kill: str) -> None:
    s, topic = stack, f"pii-{kill or 'plain'}"
    # plain: the replaced objects outlive `done` (COLD_SETTLE_MS after the rewrite) by far:
    # for as long as a fetch node that kept its list of them (READER_FILE_LIST_TTL_S, read
    # before the rewrite) would still read her rows; the others: short, the sweep is checked
    # sooner
    tid = _fill(s, topic, grace_ms=PLAIN_GRACE_MS if not kill else 1000)
    assert ALICE.encode() in _bucket_keys(s, topic)
    before = s.cluster.leader(topic).fetch_all(topic)
    want = _view([r for r in before if r["key"] != ALICE])
    assert len(want) < len(before)
    # the fetch node reads first, so it holds cached file lists from before the rewrite
    wait_for(
        "the fetch node's view of the whole topic",
        lambda: _view(_fetch_all(s.node.http, topic)) == _view(before),
    )
    leader = s.cluster.leader(topic)
    made = leader.http.post(f"/topics/{topic}/erasures", json={"keys": [ALICE]})
    assert made.status_code == 202, made.text
    eid = made.json()["id"]
    if kill == "leader":
        leader.kill()  # kill -9 mid-erasure: the others take over; it erases after restart
        leader.start()
    if kill == "compaction":
        _kill_compaction_mid_rewrite(s, topic, eid)
    done = _wait_done(s, topic, eid)

    # (a) + (b): no read path returns her records; every other record at its offset
    for b in s.cluster.brokers.values():
        assert _view(_fetch_all(b.http, topic)) == want, f"broker {b.broker_id}"
    assert _view(_fetch_all(s.node.http, topic)) == want, "fetch node"
    got = consume(s.cluster.bootstrap(), topic, 0, len(want))
    assert [(m.offset(), m.key().decode()) for m in got] == [(o, k) for o, k, _ in want]
    assert _search(s.cluster.any().http, topic) == [] and _search(s.node.http, topic) == []
    delta = DeltaTable(table_uri(s.bucket, topic), storage_options=s.bucket.storage_options())
    assert ALICE.encode() not in delta.to_pyarrow_table(columns=["key"]).column("key").to_pylist()
    assert _spark_view(spark, s, topic) == [(o, k) for o, k, _ in want], "Spark"
    # (c) replicas byte-identical, read from their segment files
    assert len({s.cluster.segment_bytes(b, topic) for b in s.cluster.brokers.values()}) == 1
    # (d) after the grace period, no object and no segment holds her key
    for b in s.cluster.brokers.values():
        assert ALICE.encode() not in _disk_keys(b.data_dir, topic)

    # the objects holding her key now are the replaced ones: polled by listing, then every
    # object left is read once
    held = {k for k, keys in _object_keys(s, topic).items() if ALICE.encode() in keys}

    def swept() -> bool:
        s.compaction.run_once()
        return not held & _objects(s, topic)

    wait_for("replaced objects deleted after the grace period", swept, timeout=90, every=0.5)
    assert ALICE.encode() not in _bucket_keys(s, topic)
    _no_orphans(s, topic, tid)
    # (e) the audit record
    assert done["requested_by"] and done["requested_at"] and done["finished_at"]
    assert set(done["hot"]) == {f"0/{b}" for b in s.cluster.brokers}
    assert all(r["done"] for r in done["hot"].values())
    cold = done["cold"]["0"]
    assert cold["done"] and cold["files_rewritten"] >= 3 and cold["records_removed"] >= 3
    per_replica = {r["records_removed"] for r in done["hot"].values()}
    if kill != "leader":  # a killed pass may have removed some before dying, then the rest
        assert per_replica == {COLD_BATCHES + HOT_BATCHES}
