"""The JVM path (docs/design.md §6): a topic's table read by Spark's own Delta reader through s3a,
with delta_session's configuration, equals what the tierlog source reads.

Needs the delta-spark and hadoop-aws jars (Maven Central or the ivy cache): skipped, with the
reason, when they cannot be had (checked in a few seconds, never a hang). Runs in a child
process: the jars must be on the classpath when the JVM starts, and the suite's shared
SparkSession has none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import data_file_key, table_uri
from coldstore.object_store import ObjectStore
from coldstore.parquet_writer import write_parquet
from logformat.frame import encode_frame
from logformat.records import build_batch
from spark_tables.delta_session import jars_available
from tests.integration.s3 import MotoServer, config_for, moto_s3_fixture  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys
from spark_tables import register, store_options
from spark_tables.delta_session import delta_session, s3a_uri
from coldstore.object_store import ObjectStoreConfig

store = ObjectStoreConfig(**json.loads(sys.argv[1]))
spark = delta_session(store, master="local[1]", conf={"spark.ui.enabled": "false"})
register(spark)
cols = ["partition", "offset", "cast(value AS STRING) AS value"]
delta = spark.read.format("delta").load(s3a_uri(store, "t")).selectExpr(*cols).collect()
ours = spark.read.format("tierlog").options(**store_options(store)).load("t")
ours = ours.selectExpr(*cols).collect()
print(json.dumps({"delta": sorted(map(list, delta)), "tierlog": sorted(map(list, ours))}))
spark.stop()
"""


def test_spark_delta_reads_the_topic_table_through_s3a(moto_s3: MotoServer) -> None:
    ok, why = jars_available(timeout_s=3)
    if not ok:
        pytest.skip(f"JVM Delta path not testable here: {why}")
    store = config_for(moto_s3.endpoint, f"delta-{uuid.uuid4().hex[:12]}", "d")
    ObjectStore(store).ensure_bucket()
    table = DeltaTopicTable(table_uri(store, "t"), store.storage_options(), topic="t")
    table.ensure_created()
    for p in (0, 1):
        vals = [f"p{p}-{i}".encode() for i in range(50)]
        batch = build_batch([None] * 50, list(vals), [None] * 50, [1_700_000_000_000] * 50, 0)
        pf = write_parquet(bytes(encode_frame(batch, base_offset=0)))
        key = data_file_key(store, "t", p, 0)
        ObjectStore(store).put(key, pf.output)
        table.commit_file(p, pf, key)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(store._asdict())],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    want = sorted([p, i, f"p{p}-{i}"] for p in (0, 1) for i in range(50))
    assert got["delta"] == got["tierlog"] == want
