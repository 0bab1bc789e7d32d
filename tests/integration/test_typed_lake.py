"""Typed lake tables (issue 29) on real processes: a broker (its Kafka listener and its
Schema Registry), confluent-kafka's serializers producing Avro, Protobuf and JSON Schema
values through three schema versions, moto's S3, and a tiering worker in this process. The
Delta table read back (deltalake) holds, for every record, its exact value bytes and its
typed value equal to what was produced; records that do not decode are tiered with a null
typed value and the reason; a type change under NONE is refused for the table."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from deltalake import DeltaTable
from prometheus_client import REGISTRY
from pyspark.sql import SparkSession

from coldstore.layout import table_uri
from compaction.jobs import Settings
from compaction.worker import CompactionWorker
from spark_tables import store_options
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tests.integration.typed_lake_env import Env, env_fixture  # noqa: F401 (fixture)
from tests.integration.typed_lake_values import (
    AVRO_VERSIONS,
    EXPECTED,
    FORMATS,
    JSON_V1,
    JSON_VERSIONS,
    PRODUCED,
    PROTO_VERSIONS,
    avro_schema,
    proto_value,
    value_ctx,
)
from tiering.worker import TieringWorker


def test_avro_through_three_versions_with_a_poisoned_record(env: Env) -> None:
    topic = "typed-avro"
    env.topic(topic)
    values: list[bytes | None] = []
    for schema, record in zip(AVRO_VERSIONS, PRODUCED, strict=True):
        values.append(AvroSerializer(env.registry, schema)(record, value_ctx(topic)))
    values.insert(2, b"\x00\x00\x00")  # poisoned: magic byte, truncated id, mid-batch
    rows = env.tier(topic, env.produce(topic, values))
    assert [r["value"] for r in rows] == values  # the bytes stay: replay is byte-exact
    typed = [r["value_typed"] for r in rows]
    assert typed == [EXPECTED[0], EXPECTED[1], None, EXPECTED[2]]
    errors = [r["value_error"] for r in rows]
    assert errors[:2] == [None, None] and errors[3] is None
    assert "too short for a schema id" in errors[2]
    typed_type = env.schema(topic).field("value_typed").type
    assert [f.name for f in typed_type] == ["id", "item", "note", "ship"]
    env.avro_offsets = env.produce(topic, [values[0]])  # a file of v1 only, for compaction
    env.avro_offsets[:0] = [r["offset"] for r in rows]
    env.tier(topic, env.avro_offsets)


def test_the_tierlog_spark_source_reads_typed_columns_cold_and_hot(
    env: Env, spark: SparkSession
) -> None:
    """spark.read.format("tierlog") with includeHot: tiered rows from the files' columns, the
    hot tail decoded in the task with tiering's decoder; both typed as the table is."""
    topic = "typed-spark"
    env.topic(topic)
    cold = [
        AvroSerializer(env.registry, schema)(record, value_ctx(topic))
        for schema, record in zip(AVRO_VERSIONS, PRODUCED, strict=True)
    ]
    cold_offsets = env.produce(topic, cold)
    env.tier(topic, cold_offsets)
    hot = [cold[2], b"plain", cold[0]]  # v3, no schema id, v1: never tiered
    hot_offsets = env.produce(topic, hot)
    tiered = {r["offset"] for r in _table_rows(env, topic)}
    assert not tiered & set(hot_offsets)  # the hot tail is read from the broker
    df = (
        spark.read.format("tierlog")
        .options(**store_options(env.s3), brokerUrl=env.broker.url, includeHot="true")
        .load(topic)
    )
    assert df.schema["value_typed"].dataType.simpleString() == (
        "struct<id:bigint,item:string,note:string,ship:struct<city:string>>"
    )
    got = {
        r.offset: (r.value_typed.asDict(recursive=True) if r.value_typed else None, r.value_error)
        for r in df.select("offset", "value_typed", "value_error").collect()
    }
    want = dict(zip(cold_offsets, [(e, None) for e in EXPECTED], strict=True))
    assert {o: got[o] for o in cold_offsets} == want
    assert got[hot_offsets[0]] == (EXPECTED[2], None)
    assert got[hot_offsets[2]] == (EXPECTED[0], None)
    assert got[hot_offsets[1]][0] is None and "magic byte" in got[hot_offsets[1]][1]
    cities = df.where("value_typed.ship.city IS NOT NULL").groupBy("value_typed.ship.city")
    assert [tuple(r) for r in cities.count().collect()] == [("Oslo", 2)]
    env.spark_rows = got


def test_a_stream_of_the_tierlog_source_carries_the_typed_columns(
    env: Env, spark: SparkSession, tmp_path: Path
) -> None:
    """spark.readStream.format("tierlog") over the topic the batch read above checked: the
    same typed values, cold files and live records alike."""
    got: dict[int, Any] = {}

    def sink(df: Any, batch_id: int) -> None:
        for r in df.select("offset", "value_typed", "value_error").collect():
            typed = r.value_typed.asDict(recursive=True) if r.value_typed else None
            got[r.offset] = (typed, r.value_error)

    stream = (
        spark.readStream.format("tierlog")
        .options(**store_options(env.s3), brokerUrl=env.broker.url)
        .load("typed-spark")
    )
    assert stream.schema["value_typed"].dataType.simpleString() == (
        "struct<id:bigint,item:string,note:string,ship:struct<city:string>>"
    )
    query = (
        stream.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    assert env.spark_rows and {o: got.get(o) for o in env.spark_rows} == env.spark_rows


def _table_rows(env: Env, topic: str) -> list[dict[str, Any]]:
    uri, options = table_uri(env.s3, topic), env.s3.storage_options()
    return list(DeltaTable(uri, storage_options=options).to_pyarrow_table().to_pylist())


def test_the_lake_answer_names_the_version_that_added_each_column(env: Env) -> None:
    """GET /topics/{topic}/lake (the console's Lake page) against deltalake's own reading of
    each version: a column's version is the first whose schema has it."""
    topic = "typed-avro"
    doc = httpx.get(f"{env.broker.url}/topics/{topic}/lake", timeout=60).json()
    columns = {c["path"]: c for c in doc["columns"]}
    assert columns["value_typed.ship.city"]["type"] == "string"
    assert columns["value_typed.id"]["type"] == "long"
    uri, options = table_uri(env.s3, topic), env.s3.storage_options()
    for path in ("offset", "value_typed", "value_typed.note", "value_typed.ship.city"):
        added = columns[path]["added_in"]
        assert _has(DeltaTable(uri, storage_options=options, version=added), path), path
        if added > 0:
            older = DeltaTable(uri, storage_options=options, version=added - 1)
            assert not _has(older, path), path


def _has(table: DeltaTable, path: str) -> bool:
    t: Any = pa.schema(table.schema().to_arrow())
    for name in path.split("."):
        if name not in t.names:
            return False
        t = t.field(name).type
    return True


def _merge_small_files(env: Env, worker_id: str) -> None:
    """One compaction pass that merges any two small files of a topic."""
    settings = Settings(min_grace_ms=0, target_file_bytes=1 << 20, merge_min_files=2)
    worker = CompactionWorker(env.engine, env.s3, worker_id, settings)
    try:
        worker.run_once()
    finally:
        worker.close()


def test_merged_files_keep_the_typed_columns_in_the_latest_schema(env: Env) -> None:
    topic = "typed-avro"
    uri, options = table_uri(env.s3, topic), env.s3.storage_options()
    before = len(DeltaTable(uri, storage_options=options).file_uris())
    _merge_small_files(env, "typed-compaction")
    assert len(DeltaTable(uri, storage_options=options).file_uris()) < before  # merged
    rows = env.tier(topic, env.avro_offsets)
    expected = [EXPECTED[0], EXPECTED[1], None, EXPECTED[2], EXPECTED[0]]
    assert [r["value_typed"] for r in rows] == expected
    assert "too short for a schema id" in rows[2]["value_error"]


def test_key_compaction_keeps_the_typed_columns(env: Env) -> None:
    topic = "typed-compacted"
    env.topic(topic, cleanup_policy="compact", min_compaction_lag_ms=0)
    v1, v2 = (AvroSerializer(env.registry, s) for s in AVRO_VERSIONS[:2])
    values: list[bytes | None] = [
        v1({"id": 1, "item": "a"}, value_ctx(topic)),
        v1({"id": 2, "item": "b"}, value_ctx(topic)),
        v2({"id": 3, "item": "c", "note": "n3"}, value_ctx(topic)),  # a newer schema, same key
        b"\x00\x00\x00",  # poisoned, the latest of its key
    ]
    keys = [b"a", b"b", b"a", b"b"]  # not k0: the tiering helper's tombstones use k0
    env.tier(topic, env.produce(topic, values, keys))
    uri, options = table_uri(env.s3, topic), env.s3.storage_options()
    settings = Settings(min_grace_ms=0, target_file_bytes=1 << 20)
    worker = CompactionWorker(env.engine, env.s3, "typed-key-compaction", settings)
    try:
        worker.run_once()
    finally:
        worker.close()
    rows = DeltaTable(uri, storage_options=options).to_pyarrow_table().to_pylist()
    latest = {r["key"]: r for r in rows if r["value"] is not None}
    assert sorted(latest) == [b"a", b"b"]  # one record per key is left
    assert latest[b"a"]["value"] == values[2]
    assert latest[b"a"]["value_typed"] == {"id": 3, "item": "c", "note": "n3"}
    assert latest[b"b"]["value"] == values[3] and latest[b"b"]["value_typed"] is None
    assert "too short for a schema id" in latest[b"b"]["value_error"]


def _untyped(topic: str, reason: str) -> float:
    labels = {"topic": topic, "reason": reason}
    return REGISTRY.get_sample_value("tierlog_tiering_untyped_records_total", labels) or 0.0


def test_a_type_change_under_none_is_refused_for_the_table_and_counted(env: Env) -> None:
    topic = "typed-none"
    env.topic(topic)
    env.registry.set_compatibility(f"{topic}-value", "NONE")
    first = AvroSerializer(env.registry, avro_schema("long"))(
        {"id": 5, "item": "x"}, value_ctx(topic)
    )
    env.tier(topic, env.produce(topic, [first]))  # the table's id column is now a long
    changed = json.dumps(
        {
            "type": "record",
            "name": "Order",
            "namespace": "shop",
            "fields": [{"name": "id", "type": "string"}, {"name": "item", "type": "string"}],
        }
    )
    second = AvroSerializer(env.registry, changed)({"id": "six", "item": "y"}, value_ctx(topic))
    rows = env.tier(topic, env.produce(topic, [first, second]))
    assert rows[0]["value_typed"] == {"id": 5, "item": "x"} and rows[1]["value_typed"] is None
    assert "id is string in this schema but int64 in the table" in rows[1]["value_error"]
    assert rows[1]["value"] == second
    assert _untyped(topic, "type_conflict") == 1
    assert env.schema(topic).field("value_typed").type.field("id").type == pa.int64()


@pytest.mark.parametrize("kind", list(FORMATS))
def test_json_schema_and_protobuf_through_three_versions_with_a_poisoned_record(
    env: Env, kind: str
) -> None:
    topic, make, expected, poison, why = FORMATS[kind]
    env.topic(topic)
    values = make(env, topic)
    assert values[0] is not None
    values.insert(2, poison(values[0]))  # mid-batch
    offsets = env.produce(topic, values[:1])  # v1 in a file of its own (merged later)
    env.tier(topic, offsets)
    offsets += env.produce(topic, values[1:])
    rows = env.tier(topic, offsets)
    assert [r["value"] for r in rows] == values  # replay is byte-exact
    assert [r["value_typed"] for r in rows] == [*expected[:2], None, expected[2]]
    errors = [r["value_error"] for r in rows]
    assert errors[:2] == [None, None] and errors[3] is None
    assert why in errors[2]
    assert _untyped(topic, "decode") == 1
    env.typed_offsets[topic] = offsets


def test_json_schema_and_protobuf_merged_files_and_hot_tail(env: Env, spark: SparkSession) -> None:
    """Compaction merges a file of v1 with one of v2, v3 and the poisoned record into the
    table's latest schema; records not tiered yet are typed the same through includeHot."""
    uri = {t: table_uri(env.s3, t) for t, *_ in FORMATS.values()}
    options = env.s3.storage_options()
    before = {t: len(DeltaTable(u, storage_options=options).file_uris()) for t, u in uri.items()}
    _merge_small_files(env, "typed-compaction-formats")
    for topic, _, expected, _, why in FORMATS.values():
        assert len(DeltaTable(uri[topic], storage_options=options).file_uris()) < before[topic]
        rows = env.tier(topic, env.typed_offsets[topic])
        assert [r["value_typed"] for r in rows] == [*expected[:2], None, expected[2]]
        assert why in rows[2]["value_error"]
        hot = [r["value"] for r in rows]
        hot_offsets = env.produce(topic, [hot[3], hot[0]])  # v3, v1: not tiered
        df = (
            spark.read.format("tierlog")
            .options(**store_options(env.s3), brokerUrl=env.broker.url, includeHot="true")
            .load(topic)
            .where(f"offset >= {hot_offsets[0]}")
        )
        got = {r.offset: r.value_typed.asDict(recursive=True) for r in df.collect()}
        assert got == dict(zip(hot_offsets, [expected[2], expected[0]], strict=True))


@pytest.mark.parametrize("kind", list(FORMATS))
def test_a_type_change_under_none_in_json_schema_and_protobuf(env: Env, kind: str) -> None:
    topic = f"typed-none-{kind}"
    env.topic(topic)
    env.registry.set_compatibility(f"{topic}-value", "NONE")
    if kind == "json":
        as_string = {**JSON_V1, "properties": {**JSON_V1["properties"], "id": {"type": "string"}}}
        first = JSONSerializer(json.dumps(JSON_V1), env.registry)(
            {"id": 5, "item": "x"}, value_ctx(topic)
        )
        second = JSONSerializer(json.dumps(as_string), env.registry)(
            {"id": "six", "item": "y"}, value_ctx(topic)
        )
    else:
        text = PROTO_VERSIONS[0].replace("int32 id", "string id")
        first = proto_value(env, topic, PROTO_VERSIONS[0], {"id": 5, "item": "x"})
        second = proto_value(env, topic, text, {"id": "six", "item": "y"})
    env.tier(topic, env.produce(topic, [first]))  # the table's id column is now a long
    rows = env.tier(topic, env.produce(topic, [first, second]))
    assert rows[0]["value_typed"] == {"id": 5, "item": "x"} and rows[1]["value_typed"] is None
    assert "id is string in this schema but int64 in the table" in rows[1]["value_error"]
    assert rows[1]["value"] == second
    assert _untyped(topic, "type_conflict") == 1
    assert env.schema(topic).field("value_typed").type.field("id").type == pa.int64()


def test_the_readme_example_runs_as_written(
    env: Env, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The README's "Typed lake tables" example (docs/lake-tables.md points to it): its polars
    block, then its Spark block (whose tierlog_session() is this module's session), run in
    this process with this module's broker, registry and S3 in dev's variables, and a
    tiering worker running."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = text[text.index("## Typed lake tables") :]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2 and 'format("tierlog")' in blocks[1]
    s3 = env.s3
    variables = {
        "TIERLOG_URL": env.broker.url,
        "TIERLOG_KAFKA_BOOTSTRAP": env.kafka,
        "TIERLOG_S3_BUCKET": s3.bucket,
        "TIERLOG_S3_PREFIX": s3.prefix,
        "TIERLOG_S3_ENDPOINT": s3.endpoint_url or "",
        "AWS_ACCESS_KEY_ID": s3.access_key_id or "",
        "AWS_SECRET_ACCESS_KEY": s3.secret_access_key or "",
        "AWS_REGION": s3.region,
    }
    for k, v in variables.items():
        monkeypatch.setenv(k, v)
    worker = TieringWorker(env.engine, s3, "typed-lake-docs")
    stop = threading.Event()
    loop = threading.Thread(target=worker.run_forever, args=(200, stop), daemon=True)
    loop.start()
    namespace: dict[str, Any] = {}
    try:
        for block in blocks:
            exec(compile(block, "README.md", "exec"), namespace)  # the README, as written
    finally:
        stop.set()
        loop.join(timeout=60)
        worker.close()
    assert namespace["spark"] is spark
    out = capsys.readouterr().out
    # amounts are the ids: per city, the sum of the ids i < 300 with i % 3 == its index; once
    # in polars' table, once in Spark's
    for city, total in (("Lima", 14950.0), ("Oslo", 14850.0), ("Pune", 15050.0)):
        assert len(re.findall(rf"{city}\W+{total}", out)) == 2, out


def test_value_schema_latest_parses_plain_json_with_the_subjects_latest_schema(
    env: Env,
) -> None:
    topic = "typed-latest"
    env.topic(topic, "value_schema_latest")
    env.registry.set_compatibility(f"{topic}-value", "NONE")
    env.registry.register_schema(f"{topic}-value", Schema(json.dumps(JSON_VERSIONS[0]), "JSON"))
    env.registry.register_schema(f"{topic}-value", Schema(json.dumps(JSON_VERSIONS[2]), "JSON"))
    values: list[bytes | None] = [
        b'{"id": 1, "item": "a"}',
        b'{"id": 1099511627776, "item": "c", "ship": {"city": "Oslo"}}',
        b"not json",
    ]
    rows = env.tier(topic, env.produce(topic, values))
    assert [r["value"] for r in rows] == values
    assert [r["value_typed"] for r in rows] == [EXPECTED[0], EXPECTED[2], None]
    assert "not JSON" in rows[2]["value_error"]
