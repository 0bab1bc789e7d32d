"""spark.read.format("tierlog") over a cold archive, against real local Spark, moto's S3
server and Postgres.

The archive is made by the real TieringWorker (Parquet writer, Delta commit, manifest) from
segments served by an in-memory stand-in for the replicas, with small row groups so row-group
pruning shows. Pruning is checked through the reader's own report (reportDir): the files and
row groups it planned and the bytes its tasks fetched — never through timing.

The Spark session is the one test_spark_source.py makes for the whole run.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from sqlalchemy.engine import Engine

from coldstore.object_store import ObjectStore, ObjectStoreConfig
from logformat.frame import encode_frame
from logformat.records import build_batch
from metadata.brokers import BrokerRepo
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.segment_registry import SegmentRegistry
from metadata.topics import TopicRepo
from metadata.types import TopicIdPartition
from spark_tables import report, store_options
from tests.integration.s3 import MotoServer, config_for, moto_s3_fixture  # noqa: F401
from tests.integration.test_spark_source import T0, rows_of
from tiering.segment_source import Downloaded
from tiering.worker import TieringWorker

PARTITIONS, SEGMENTS, PER_SEGMENT = 3, 4, 200
TOPIC = "orders"


# -- the archive: real tiering of in-memory segments ------------------------------------------


class MemorySegments:
    """Stands in for the replicas' segment endpoint (tiering.segment_source.SegmentSource)."""

    def __init__(self) -> None:
        self.segments: dict[tuple[str, int, int], bytes] = {}

    def download(self, claim: Any, dest_dir: str) -> Downloaded:
        data = self.segments[(claim.topic, claim.partition, claim.base_offset)]
        path = Path(dest_dir) / f"seg-{claim.base_offset}"
        path.write_bytes(data)
        return Downloaded(path, 1, len(data))

    def close(self) -> None:
        pass


def _record(p: int, offset: int) -> tuple[Any, ...]:
    """(key, value, ts ms, headers) of record `offset` of partition `p`."""
    ts = T0 + offset * 1000 + p
    if p == 0 and offset < 6:  # the awkward ones
        return [
            (b"\x00\xff binary", bytes(range(256)), ts, None),
            (None, b'{"n": 1, "p": 0, "tag": "no key"}', ts, None),
            (b"k2", None, ts, None),  # a tombstone
            (b"k3", b'{"n": 3, "p": 0, "tag": "h"}', ts, [("h1", b"\x00\x01"), ("ünï", b"")]),
            ("ключ".encode(), "värde ✓".encode(), ts, []),
            (b"", b"", ts, None),
        ][offset]
    value = json.dumps({"n": offset, "p": p, "tag": "ab"[offset % 2]}).encode()
    return (f"k{offset}".encode(), value, ts, None)


class Archive:
    def __init__(self, engine: Engine, db_url: str, store: ObjectStoreConfig) -> None:
        self.engine, self.db_url, self.store = engine, db_url, store
        self.expected = {
            (p, o): _record(p, o) for p in range(PARTITIONS) for o in range(SEGMENTS * PER_SEGMENT)
        }
        BrokerRepo(engine).register(1, "http://127.0.0.1:9", 600_000)
        self.topic_id = TopicRepo(engine).create(TOPIC, PARTITIONS, 1).id
        registry, source = SegmentRegistry(engine), MemorySegments()
        for p in range(PARTITIONS):
            for s in range(SEGMENTS):
                base = s * PER_SEGMENT
                data = self._segment(p, base)
                source.segments[(TOPIC, p, base)] = data
                registry.register_sealed(
                    TopicIdPartition(self.topic_id, p), base, base + PER_SEGMENT, len(data)
                )
        worker = TieringWorker(engine, store, "archiver", row_group_bytes=4096)
        worker._source = source  # type: ignore[assignment]
        while worker.run_once():
            pass
        worker.close()
        self.files = {
            p: ColdManifest(engine).files(TopicIdPartition(self.topic_id, p))
            for p in range(PARTITIONS)
        }
        assert all(len(fs) == SEGMENTS for fs in self.files.values())

    def _segment(self, p: int, base: int) -> bytes:
        frames = []
        for start in range(base, base + PER_SEGMENT, 25):
            recs = [_record(p, o) for o in range(start, start + 25)]
            batch = build_batch(
                [r[0] for r in recs],
                [r[1] for r in recs],
                [None if r[3] is None else [{"key": k, "value": v} for k, v in r[3]] for r in recs],
                [r[2] for r in recs],
                T0,
            )
            frames.append(bytes(encode_frame(batch, base_offset=start, compression="zstd")))
        return b"".join(frames)

    def options(self, **more: str) -> dict[str, str]:
        return {**store_options(self.store), **more}

    def want(self, keep: Any = lambda p, o, ts: True) -> list[tuple[Any, ...]]:
        out = []
        for (p, o), (k, v, ts, h) in sorted(self.expected.items()):
            if keep(p, o, ts):
                out.append((p, o, ts, k, v, h or ([] if h == [] else None)))
        return out


@pytest.fixture(scope="module")
def archive(db_factory: Any, moto_s3: MotoServer) -> Iterator[Archive]:
    url = db_factory()
    engine = make_engine(url)
    store = config_for(moto_s3.endpoint, f"spark-{uuid.uuid4().hex[:12]}", "arch")
    ObjectStore(store).ensure_bucket()
    yield Archive(engine, url, store)
    engine.dispose()


def scan(
    spark: SparkSession, archive: Archive, report_dir: Path, where: str | None = None, **opts: str
) -> tuple[list[tuple[Any, ...]], dict[str, Any], list[dict[str, Any]]]:
    """(rows sorted by partition/offset, the plan, the task reads) of one query."""
    report.clear(report_dir)
    reader = spark.read.format("tierlog")
    df = reader.options(**archive.options(reportDir=str(report_dir), **opts)).load(TOPIC)
    if where:
        df = df.where(where)
    rows = sorted(rows_of(df))
    entries = report.read(report_dir)
    plans = [e for e in entries if e["kind"] == "plan"]
    reads = [e for e in entries if e["kind"] in ("read", "hot")]
    # A filter Spark proves false (offset IS NULL on a non-null column) skips the scan.
    plan = plans[-1] if plans else {"files_planned": [], "hot": [], "row_groups": {}}
    return rows, plan, reads


def keys_of(archive: Archive, partition: int, *segments: int) -> list[str]:
    return sorted(archive.files[partition][s].object_key for s in segments)


# -- tests ------------------------------------------------------------------------------------


def test_a_full_scan_returns_every_record_byte_exact_once(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    rows, plan, reads = scan(spark, archive, tmp_path)
    assert rows == archive.want()
    assert plan["files_planned"] == sorted(
        f.object_key for fs in archive.files.values() for f in fs
    )
    assert plan["footers_read"] == 0  # nothing to prune: files are read whole, footers once
    df = spark.read.format("tierlog").options(**archive.options()).load(TOPIC)
    assert df.columns == ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]
    assert {r.topic for r in df.select("topic").distinct().collect()} == {TOPIC}
    # a file read whole is fetched once: no footer read before its row groups
    sizes = {f.object_key: f.size_bytes for fs in archive.files.values() for f in fs}
    assert sorted((r["key"], r["bytes_read"]) for r in reads) == sorted(sizes.items())


def test_small_files_packed_into_few_tasks_read_each_file_once_in_order(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    """minPartitions=1: all 12 files in one task (rows in partition, offset order); as many
    tasks as files: one each. Both read the same records, each file once."""
    every = sorted(f.object_key for fs in archive.files.values() for f in fs)
    for min_partitions, tasks in (("1", 1), ("100", PARTITIONS * SEGMENTS)):
        rows, plan, reads = scan(spark, archive, tmp_path, minPartitions=min_partitions)
        assert rows == archive.want()
        assert plan["input_partitions"] == tasks and plan["pieces"] == len(every)
        assert sorted(r["key"] for r in reads) == every
    one_task = spark.read.format("tierlog").options(**archive.options(minPartitions="1"))
    in_order = rows_of(one_task.load(TOPIC))
    assert in_order == archive.want()  # not sorted here: the task's own order


def test_a_partition_filter_reads_only_that_partitions_files(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    rows, plan, reads = scan(spark, archive, tmp_path, "partition = 1")
    assert rows == archive.want(lambda p, o, ts: p == 1)
    assert plan["files_planned"] == keys_of(archive, 1, 0, 1, 2, 3)
    assert {r["key"] for r in reads} == set(plan["files_planned"])
    rows, plan, _ = scan(spark, archive, tmp_path, "partition IN (0, 2) AND offset < 10")
    assert rows == archive.want(lambda p, o, ts: p in (0, 2) and o < 10)
    assert plan["files_planned"] == sorted(keys_of(archive, 0, 0) + keys_of(archive, 2, 0))


def test_an_offset_range_reads_one_file_and_only_its_row_groups(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    rows, plan, reads = scan(
        spark, archive, tmp_path, "partition = 2 AND offset >= 250 AND offset <= 270"
    )
    assert rows == archive.want(lambda p, o, ts: p == 2 and 250 <= o <= 270)
    (key,) = keys_of(archive, 2, 1)
    assert plan["files_planned"] == [key]
    groups = plan["row_groups"][key]
    total_groups = _row_groups(archive, key)
    assert 1 <= len(groups) < total_groups  # the other row groups are never fetched
    (read,) = reads
    assert read["row_groups"] == groups
    size = archive.files[2][1].size_bytes
    assert read["bytes_read"] < size / 2


def test_a_time_window_reads_only_the_overlapping_files_and_row_groups(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    lo = dt.datetime.fromtimestamp((T0 + 410_000) / 1000, dt.UTC)
    hi = dt.datetime.fromtimestamp((T0 + 430_000) / 1000, dt.UTC)
    where = f"timestamp >= '{lo:%Y-%m-%d %H:%M:%S}' AND timestamp < '{hi:%Y-%m-%d %H:%M:%S}'"
    rows, plan, reads = scan(spark, archive, tmp_path, where)
    assert rows == archive.want(lambda p, o, ts: T0 + 410_000 <= ts < T0 + 430_000)
    assert len(rows) == 3 * 20
    assert plan["files_planned"] == sorted(k for p in range(3) for k in keys_of(archive, p, 2))
    for key in plan["files_planned"]:
        assert len(plan["row_groups"][key]) < _row_groups(archive, key)
    assert sorted((r["key"], r["row_groups"]) for r in reads) == sorted(plan["row_groups"].items())
    # the options give the same window, exactly, with the same pruning
    rows2, plan2, _ = scan(
        spark,
        archive,
        tmp_path,
        startingTimestamp=str(T0 + 410_000),
        endingTimestamp=str(T0 + 430_000),
    )
    assert rows2 == rows and plan2["files_planned"] == plan["files_planned"]


def test_offset_options_and_partitions_option(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    rows, plan, _ = scan(
        spark,
        archive,
        tmp_path,
        partitions="0,1",
        startingOffsets=json.dumps({TOPIC: {"0": 395, "1": -2}}),
        endingOffsets=json.dumps({"0": 405, "1": 3}),
    )
    assert rows == archive.want(lambda p, o, ts: (p == 0 and 395 <= o < 405) or (p == 1 and o < 3))
    assert plan["files_planned"] == sorted(keys_of(archive, 0, 1, 2) + keys_of(archive, 1, 0))
    rows, _, _ = scan(spark, archive, tmp_path, startingOffsets="latest")
    assert rows == []


def test_no_file_is_read_when_nothing_can_match(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    for where in ("topic = 'other'", "offset > 100000", "partition = 7", "offset IS NULL"):
        rows, plan, reads = scan(spark, archive, tmp_path, where)
        assert rows == [] and plan["files_planned"] == [] and reads == [], where


def test_big_files_split_into_row_group_ranges_without_duplicates(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    rows, plan, reads = scan(spark, archive, tmp_path, "partition = 0", maxPartitionBytes="3000")
    assert rows == archive.want(lambda p, o, ts: p == 0)
    assert plan["input_partitions"] > SEGMENTS
    per_file: dict[str, list[int]] = {}
    for r in reads:
        per_file.setdefault(r["key"], []).extend(r["row_groups"])
    for key, groups in per_file.items():
        assert sorted(groups) == list(range(_row_groups(archive, key)))  # each exactly once


def test_a_projection_fetches_and_returns_only_its_columns(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    """columns=offset,key: the rows are the full scan's, projected (what it saves in bytes
    shows on files bigger than these: bench/spark_scan.py)."""
    report.clear(tmp_path)
    opts = archive.options(reportDir=str(tmp_path), columns="key,offset")
    df = spark.read.format("tierlog").options(**opts).load(TOPIC)
    assert df.columns == ["offset", "key"]
    got = sorted(
        (r.offset, _bytes(r.key)) for r in df.where("offset >= 390 AND offset < 410").collect()
    )
    want = sorted((o, k) for p, o, _ts, k, _v, _h in archive.want() if 390 <= o < 410)
    assert got == want and len(got) == PARTITIONS * 20
    # a new DataFrame: Spark 4.2 reuses the filtered query's plan for an unfiltered query on
    # the same DataFrame (its pushdown result is cached), whatever the source does
    df = spark.read.format("tierlog").options(**opts).load(TOPIC)
    assert df.count() == PARTITIONS * SEGMENTS * PER_SEGMENT


def test_the_manifest_plans_the_same_scan_as_the_delta_log(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    where = "partition = 1 AND offset BETWEEN 150 AND 450"
    by_delta = scan(spark, archive, tmp_path, where, planFrom="delta")
    by_manifest = scan(spark, archive, tmp_path, where, databaseUrl=archive.db_url)
    assert (
        by_manifest[0] == by_delta[0] == archive.want(lambda p, o, ts: p == 1 and 150 <= o <= 450)
    )
    assert by_manifest[1]["files_planned"] == by_delta[1]["files_planned"]
    assert by_manifest[1]["row_groups"] == by_delta[1]["row_groups"]


def test_value_formats_string_and_json(spark: SparkSession, archive: Archive) -> None:
    def base() -> Any:  # a new reader each time: DataFrameReader.option mutates the reader
        return spark.read.format("tierlog").options(**archive.options())

    text = base().option("valueFormat", "string").option("keyFormat", "string").load(TOPIC)
    got = {r.offset: (r.key, r.value) for r in text.where("partition = 0 AND offset < 6").collect()}
    assert got[1] == (None, '{"n": 1, "p": 0, "tag": "no key"}')
    assert got[2] == ("k2", None)
    assert got[4] == ("ключ", "värde ✓")
    assert got[0][1] == bytes(range(256)).decode("utf-8", "replace")  # lossy, as the API's
    typed = base().option("valueFormat", "json").option("valueSchema", "n BIGINT, tag STRING")
    typed.load(TOPIC).createOrReplaceTempView("orders_json")
    counts = spark.sql(
        "SELECT value.tag AS tag, count(*) AS n FROM orders_json "
        "WHERE value.n >= 100 GROUP BY value.tag ORDER BY tag"
    ).collect()
    assert [(r.tag, r.n) for r in counts] == [("a", 3 * 350), ("b", 3 * 350)]
    odd = {
        r.offset: r.value for r in typed.load(TOPIC).where("partition = 0 AND offset < 4").collect()
    }
    assert odd[0] is None and odd[2] is None  # not JSON / a tombstone: null, not an error
    assert (odd[1].n, odd[1].tag) == (1, "no key")
    inferred = base().option("valueFormat", "json").load(TOPIC)
    fields = {f.name: f.dataType.simpleString() for f in inferred.schema["value"].dataType.fields}
    assert fields == {"n": "bigint", "p": "bigint", "tag": "string"}
    assert inferred.where("value.p = 2").count() == SEGMENTS * PER_SEGMENT


def _row_groups(archive: Archive, key: str) -> int:
    from spark_tables.cold_files import ColdFileInfo
    from spark_tables.parquet_read import read_metadata

    f = next(f for fs in archive.files.values() for f in fs if f.object_key == key)
    info = ColdFileInfo(key, f.partition, f.size_bytes, None, None, None, None, None)
    md, _ = read_metadata(archive.store, info)
    return int(md.num_row_groups)


def _bytes(v: bytes | bytearray | None) -> bytes | None:
    return None if v is None else bytes(v)  # Spark gives BINARY as bytearray
