"""The console's Lake page (issue 20 item 6) and the API under it, on real parts: a broker with
S3 (moto), a topic tiered by a real tiering worker into its Delta table, Postgres, and a
`tierlog console` in headless Chromium. GET /topics/{topic}/lake gives the live files with
their offset ranges and sizes (the manifest) and the table's versions (the Delta log), paged;
a group's lag in time is read from the same tiered records."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from coldstore.object_store import ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.types import TopicIdPartition
from tests.integration.cluster import wait_for
from tests.integration.console_browser import (  # noqa: F401
    ConsoleStack,
    browser_fixture,
    console_fixture,
)
from tests.integration.fetch_nodes import s3_env
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tiering.worker import TieringWorker

TOPIC = "lake"
PARTITIONS = 2
PER_PARTITION = 24
BATCH = 6  # records per produce: one frame of ~1.3 KB, so each fills a 1 KiB segment
T0 = int(time.time() * 1000) - 3600_000  # an hour ago


class Lake:
    def __init__(self, stack: ConsoleStack, bucket: ObjectStoreConfig, tid: str) -> None:
        self.stack = stack
        self.http = stack.broker.http
        self.bucket = bucket
        self.tid = tid


@pytest.fixture(scope="module")
def bucket(moto_s3: MotoServer) -> ObjectStoreConfig:
    return new_bucket(moto_s3)


@pytest.fixture(scope="module", autouse=True)
def s3_for_the_broker(bucket: ObjectStoreConfig) -> Iterator[None]:
    """Autouse, so it runs before the harness starts the module's broker: the broker (and
    the console, which ignores it) inherit the bucket's TIERLOG_S3_* settings."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in s3_env(bucket).items():
            mp.setenv(k, v)
        yield


def _tier(db: str, bucket: ObjectStoreConfig, tid: str) -> None:
    """Run a tiering worker until both partitions have files in the table."""
    engine = make_engine(db, pool_size=2)
    manifest = ColdManifest(engine)
    worker = TieringWorker(engine, bucket, "lake-worker")
    try:

        def tiered() -> bool:
            worker.run_once()
            ends = [manifest.tiered_end_offset(TopicIdPartition(tid, p)) for p in (0, 1)]
            return all((e or 0) >= PER_PARTITION // 2 for e in ends)

        wait_for("both partitions tiered", tiered, timeout=90, every=0.2)
    finally:
        worker.close()
        engine.dispose()


@pytest.fixture(scope="module")
def lake(console: ConsoleStack, bucket: ObjectStoreConfig) -> Lake:
    b = console.broker
    body = {"name": TOPIC, "partitions": PARTITIONS, "configs": {"segment.bytes": 1024}}
    r = b.http.post("/topics", json=body)
    assert r.status_code == 201, r.text
    for p in range(PARTITIONS):
        for i in range(0, PER_PARTITION, BATCH):
            recs = [
                {"value": "x" * 200, "partition": p, "timestamp": T0 + 1000 * j}
                for j in range(i, i + BATCH)
            ]
            assert (
                b.http.post(f"/topics/{TOPIC}/records", json={"records": recs}).status_code == 200
            )
    _tier(b.database_url, bucket, str(r.json()["id"]))
    return Lake(console, bucket, str(r.json()["id"]))


def ok(r: Any) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_lake_lists_files_ranges_and_versions(lake: Lake) -> None:
    http = lake.http
    doc = ok(http.get(f"/topics/{TOPIC}/lake"))
    assert doc["table_uri"] == f"s3://{lake.bucket.bucket}/{lake.bucket.prefix}/topics/{TOPIC}"
    files = doc["files"]
    assert {f["partition"] for f in files} == {0, 1}
    for p in (0, 1):
        mine = [f for f in files if f["partition"] == p]
        assert mine[0]["first_offset"] == 0
        for a, b in itertools.pairwise(mine):  # contiguous, in offset order
            assert b["first_offset"] == a["last_offset"] + 1
        summary = doc["partitions"][p]
        assert summary["first_offset"] == 0 and summary["last_offset"] == mine[-1]["last_offset"]
        assert summary["records"] == sum(f["last_offset"] - f["first_offset"] + 1 for f in mine)
    for f in files:
        assert f["path"].startswith(f"partition={f['partition']}/") and f["size_bytes"] > 0
        assert f["min_timestamp"] == T0 + 1000 * f["first_offset"]
    assert doc["totals"]["files"] == len(files)

    versions = doc["versions"]
    assert [v["version"] for v in versions] == list(range(doc["version"], -1, -1))
    assert versions[-1]["operation"] == "CREATE TABLE" and versions[-1]["files_added"] == 0
    # Every live file was added by the version the manifest names, with its offset range.
    by_version = {v["version"]: v for v in versions}
    for f in files:
        ranges = by_version[f["delta_version"]]["offset_ranges"]
        assert any(
            r["partition"] == f["partition"]
            and r["first"] <= f["first_offset"]
            and f["last_offset"] <= r["last"]
            for r in ranges
        ), (f, ranges)
    assert sum(v["files_added"] for v in versions) == len(files)  # nothing compacted yet


def test_lake_versions_page_backwards(lake: Lake) -> None:
    http = lake.http
    newest = ok(http.get(f"/topics/{TOPIC}/lake", params={"limit": 1}))
    assert len(newest["versions"]) == 1 and newest["next_before"] == newest["version"]
    older = ok(http.get(f"/topics/{TOPIC}/lake", params={"limit": 2, "before": newest["version"]}))
    assert [v["version"] for v in older["versions"]] == [
        newest["version"] - 1,
        newest["version"] - 2,
    ][: len(older["versions"])]
    for bad in ({"limit": 0}, {"limit": "x"}, {"before": -1}):
        r = http.get(f"/topics/{TOPIC}/lake", params=bad)
        assert r.status_code == 400 and r.json()["error_code"] == "INVALID_REQUEST", r.text
    r = http.get("/topics/nope/lake")
    assert r.status_code == 404 and r.json()["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_group_lag_in_time_from_tiered_records(lake: Lake) -> None:
    http = lake.http
    reset = {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 2}]}
    ok(http.post("/groups/lake-readers/offsets/reset", json=reset))
    before = int(time.time() * 1000)
    rows = ok(http.get("/groups/lake-readers"))["offsets"]
    after = int(time.time() * 1000)
    age = next(r["lag_ms"] for r in rows if r["partition"] == 0)
    assert before - (T0 + 2000) <= age <= after - (T0 + 2000)


def test_lake_page_lists_the_tiered_files_and_a_spark_snippet(
    browser: ConsoleStack, lake: Lake
) -> None:
    api = ok(lake.http.get(f"/topics/{TOPIC}/lake"))
    browser.visit("/lake", "lake")
    assert browser.text(f"#tables tr[data-topic='{TOPIC}'] .files") == str(len(api["files"]))
    browser.visit(f"/lake/{TOPIC}", "lake-table")
    rows = browser.driver.find_elements("css selector", "#files tbody tr[data-path]")
    assert [r.get_attribute("data-path") for r in rows] == [f["path"] for f in api["files"]]
    first = api["files"][0]
    cell = f"#files tr[data-path='{first['path']}'] .offsets"
    assert browser.text(cell) == f"{first['first_offset']}\u2013{first['last_offset']}"
    assert "CREATE TABLE" in browser.text("#versions tr[data-version='0']")
    snippet = browser.text("#spark-snippet")
    assert f'.option("bucket", "{lake.bucket.bucket}")' in snippet
    assert f'.option("prefix", "{lake.bucket.prefix}")' in snippet
    assert f'.load("{TOPIC}")' in snippet and 'format("tierlog")' in snippet
    compile(snippet, "snippet", "exec")  # ready to paste: valid Python


TYPED_TOPIC = "lake-typed"
TYPED_V1 = {"type": "object", "properties": {"id": {"type": "integer"}, "item": {"type": "string"}}}
SHIP = {"type": "object", "properties": {"city": {"type": "string"}}}
TYPED_V2 = {"type": "object", "properties": {**TYPED_V1["properties"], "ship": SHIP}}


def _typed_version(stack: ConsoleStack, bucket: ObjectStoreConfig, schema: dict[str, Any]) -> None:
    """Register `schema` as the subject's latest, produce values of it and tier until the
    table's columns hold every property of it (one Delta version adds them)."""
    http = stack.broker.http
    subject = f"{TYPED_TOPIC}-value"
    body = {"schema": json.dumps(schema), "schemaType": "JSON"}
    ok(http.post(f"/schema-registry/subjects/{subject}/versions", json=body))
    value: dict[str, Any] = {"id": 7, "item": "x" * 200}  # a produce fills a 1 KiB segment
    if "ship" in schema["properties"]:
        value["ship"] = {"city": "Oslo"}
    recs = [{"value": json.dumps(value)} for _ in range(BATCH)]
    for _ in range(2):  # the second seals the first's segment, for tiering
        r = http.post(f"/topics/{TYPED_TOPIC}/records", json={"records": recs})
        assert r.status_code == 200, r.text
    engine = make_engine(stack.broker.database_url, pool_size=2)
    worker = TieringWorker(engine, bucket, "lake-typed-worker")
    want = {"value_typed." + ".".join(p) for p in _paths(schema)}
    try:

        def typed() -> bool:
            worker.run_once()
            doc = http.get(f"/topics/{TYPED_TOPIC}/lake")
            return doc.status_code == 200 and want <= {c["path"] for c in doc.json()["columns"]}

        wait_for("the typed columns in the table", typed, timeout=90, every=0.2)
    finally:
        worker.close()
        engine.dispose()


def _paths(schema: dict[str, Any]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for name, sub in schema["properties"].items():
        out.append((name,))
        out += [(name, *p) for p in _paths(sub)] if "properties" in sub else []
    return out


def test_lake_page_shows_the_schema_with_the_version_that_added_each_column(
    browser: ConsoleStack, lake: Lake
) -> None:
    """Issue 29: a typed table's schema, nested columns included, each with the first table
    version that has it; the nested property of the schema's second version came later."""
    http = lake.http
    configs = {"segment.bytes": 1024, "lake.mode": "value_schema_latest"}
    r = http.post("/topics", json={"name": TYPED_TOPIC, "partitions": 1, "configs": configs})
    assert r.status_code == 201, r.text
    level = {"compatibility": "NONE"}  # a property added to an open content model
    ok(http.put(f"/schema-registry/config/{TYPED_TOPIC}-value", json=level))
    _typed_version(browser, lake.bucket, TYPED_V1)
    _typed_version(browser, lake.bucket, TYPED_V2)
    api = {c["path"]: c for c in ok(http.get(f"/topics/{TYPED_TOPIC}/lake"))["columns"]}
    assert api["value_typed.ship.city"]["added_in"] > api["value_typed.id"]["added_in"]
    browser.visit(f"/lake/{TYPED_TOPIC}", "lake-typed-table")
    rows = browser.driver.find_elements("css selector", "#lake-columns tbody tr[data-column]")
    assert [r.get_attribute("data-column") for r in rows] == list(api)
    for path in ("offset", "value_typed.id", "value_typed.ship", "value_typed.ship.city"):
        cells = [
            c.text
            for c in browser.driver.find_elements(
                "css selector", f"#lake-columns tr[data-column='{path}'] td"
            )
        ]
        assert cells == [path, api[path]["type"], str(api[path]["added_in"])], path
