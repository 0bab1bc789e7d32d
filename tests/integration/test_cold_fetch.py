"""Fetch across tiers on real parts: two broker processes (RF 2, tiny segments, local
retention that deletes what is tiered), a tiering worker in-process, moto's S3 server, a
`tierlog fetch` node, Postgres. A consumer reading from offset 0 gets every record exactly
once and byte-equal, across the cold/hot seam, from a broker and from the fetch node."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from sqlalchemy.engine import Engine

from coldstore.object_store import ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.types import TopicIdPartition
from tests.integration.cluster import Cluster, wait_for
from tests.integration.fetch_nodes import FetchNodeProcess, s3_env
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tiering.worker import TieringWorker

ARROW = "application/vnd.apache.arrow.stream"
T_OLD = int(time.time() * 1000) - 3600_000  # an hour ago: local retention may delete at once
N = 150


def b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def want(i: int) -> dict[str, Any]:
    """Record i: binary keys and values with every byte value, tombstones, null keys, headers
    (repeated names, binary values, a null value)."""
    key = None if i % 9 == 0 else bytes([i % 256, 0, 0xFF, 0x80]) + str(i).encode()
    value = None if i % 13 == 0 else bytes((i + j) % 256 for j in range(150 + i % 70))
    headers = []
    if i % 4 == 0:
        headers = [("h", bytes([i % 256, 0xFE])), ("h", b"again"), ("n", None)]
    return {"key": key, "value": value, "headers": headers, "ts": T_OLD + i * 1000}


def produce_body(i: int) -> dict[str, Any]:
    w = want(i)
    body: dict[str, Any] = {
        "partition": 0,
        "key_b64": b64(w["key"]),
        "value_b64": b64(w["value"]),
        "timestamp": w["ts"],
    }
    if w["headers"]:
        body["headers"] = [{"key": k, "value_b64": b64(v)} for k, v in w["headers"]]
    return body


def check_json(rec: dict[str, Any]) -> None:
    w = want(rec["offset"])
    assert rec.get("key_b64") == b64(w["key"]), rec
    assert rec.get("value_b64") == b64(w["value"]), rec
    assert rec["timestamp"] == w["ts"]
    got_headers = rec["headers"] or []
    assert [(h["key"], h["value_b64"]) for h in got_headers] == [
        (k, b64(v)) for k, v in w["headers"]
    ]


def read_all_json(http: httpx.Client, start: int, end: int, step: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    offset = start
    while offset < end:
        r = http.get(
            "/topics/cold/partitions/0/records",
            params={"offset": offset, "max_records": step, "value_format": "base64"},
        )
        assert r.status_code == 200, r.text
        doc = r.json()
        assert doc["records"], doc
        assert doc["log_start_offset"] == 0 and doc["high_watermark"] >= end
        assert doc["records"][0]["offset"] == offset
        assert doc["next_offset"] == doc["records"][-1]["offset"] + 1
        assert r.headers["x-tierlog-next-offset"] == str(doc["next_offset"])
        out.extend(doc["records"])
        offset = doc["next_offset"]
    return out


def read_all_arrow(http: httpx.Client, end: int, step: int) -> pa.Table:
    parts = []
    offset = 0
    while offset < end:
        r = http.get(
            "/topics/cold/partitions/0/records",
            params={"offset": offset, "max_records": step},
            headers={"accept": ARROW},
        )
        assert r.status_code == 200, r.text
        table = pa.ipc.open_stream(r.content).read_all()
        assert table.num_rows and table.column(0)[0].as_py() == offset
        parts.append(table)
        offset = int(r.headers["x-tierlog-next-offset"])
    return pa.concat_tables(parts)


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"{name}(?:\{{(.*)\}})? (\S+)$", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            total += float(m.group(2))
    return total


@pytest.fixture(scope="module")
def cold_db(db_factory: Callable[..., str]) -> str:
    """The module's database: its tests share one tiered topic (building it takes seconds)."""
    return db_factory()


@pytest.fixture(scope="module")
def engine(cold_db: str) -> Iterator[Engine]:
    """On the module's database (the conftest's `engine` is on a per-test one)."""
    e = make_engine(cold_db)
    yield e
    e.dispose()


@pytest.fixture(scope="module")
def tiered(
    cold_db: str,
    tmp_path_factory: pytest.TempPathFactory,
    moto_s3: MotoServer,
    engine: Engine,
) -> Iterator[tuple[Cluster, FetchNodeProcess, str, int]]:
    """A topic whose first segments are tiered and deleted from both brokers' disks.

    Shared by the module's tests, which only read it; the last test (the 416 one) deletes
    the first cold file from the manifest, so it stays last in the file."""
    s3_bucket = new_bucket(moto_s3)
    tmp_path = tmp_path_factory.mktemp("cold")
    with pytest.MonkeyPatch.context() as monkeypatch:
        for k, v in s3_env(s3_bucket).items():
            monkeypatch.setenv(k, v)
        yield from _tiered(cold_db, tmp_path, s3_bucket, engine)


def _tiered(
    fresh_db: str, tmp_path: Path, s3_bucket: ObjectStoreConfig, engine: Engine
) -> Iterator[tuple[Cluster, FetchNodeProcess, str, int]]:
    cluster = Cluster(fresh_db, tmp_path, 2).start()
    node: FetchNodeProcess | None = None
    try:
        r = cluster.any().http.post(
            "/topics",
            json={
                "name": "cold",
                "partitions": 1,
                "replication_factor": 2,
                "configs": {"segment.bytes": 4096, "local.retention.ms": 1000},
            },
        )
        assert r.status_code == 201, r.text
        tid = str(r.json()["id"])
        wait_for("replicas in sync", lambda: len(cluster.partition("cold")["isr"]) == 2)
        for i in range(0, N, 3):
            cluster.produce("cold", [produce_body(j) for j in range(i, i + 3)])
        manifest = ColdManifest(engine)
        worker = TieringWorker(engine, s3_bucket, "cold-worker")
        try:

            def tiered_far() -> bool:
                worker.run_once()
                return (manifest.tiered_end_offset(TopicIdPartition(tid, 0)) or 0) >= N // 2

            wait_for("half the topic tiered", tiered_far, timeout=90, every=0.3)
            worker.run_once()
        finally:
            worker.close()

        def deleted_locally() -> int | None:
            start = int(cluster.partition("cold")["hot"]["start"])
            return start if start >= N // 3 else None

        hot_start = wait_for("tiered segments deleted locally", deleted_locally, timeout=30)
        node = FetchNodeProcess(fresh_db, tmp_path / "fetch.log", s3_env(s3_bucket)).start()
        yield cluster, node, tid, hot_start
    finally:
        if node is not None:
            node.stop()
        cluster.stop()


def test_replay_across_the_seam_from_brokers_and_fetch_node(
    tiered: tuple[Cluster, FetchNodeProcess, str, int],
) -> None:
    cluster, node, _tid, hot_start = tiered
    p = cluster.partition("cold")
    assert 0 < hot_start <= p["cold"]["end"] and p["log_start_offset"] == 0
    readers = [b.http for b in cluster.brokers.values()] + [node.http]
    docs = []
    for http in readers:  # leader, follower (forwards to the leader), fetch node
        for step in (7, 500):
            recs = read_all_json(http, 0, N, step)
            assert [x["offset"] for x in recs] == list(range(N))  # each exactly once, in order
            for rec in recs:
                check_json(rec)
            docs.append(recs)
    assert all(d == docs[0] for d in docs)  # byte-identical documents, hot or cold, any node
    # The default value format too: same rendering from cold as from hot.
    auto = [
        http.get(
            "/topics/cold/partitions/0/records", params={"offset": o, "max_records": 3}
        ).json()["records"]
        for http in readers
        for o in (hot_start - 2, hot_start + 1)
    ]
    assert auto[0] == auto[2] == auto[4] and auto[1] == auto[3] == auto[5]
    # Arrow: the same table from every reader, equal to what was produced.
    tables = [read_all_arrow(http, N, 11) for http in readers]
    for t in tables[1:]:
        assert t.equals(tables[0])
    assert tables[0].column(0).to_pylist() == list(range(N))
    assert tables[0].column(2).to_pylist() == [want(i)["key"] for i in range(N)]
    assert tables[0].column(3).to_pylist() == [want(i)["value"] for i in range(N)]
    # No offset: the log start across tiers (0, in the cold tier).
    r = node.http.get("/topics/cold/partitions/0/records", params={"max_records": 1})
    assert r.json()["records"][0]["offset"] == 0
    r = cluster.leader("cold").http.get("/topics/cold/partitions/0/records")
    assert r.json()["records"][0]["offset"] == 0
    # The node read cold itself and sent hot reads to the follower first.
    metrics = node.http.get("/metrics").text
    assert _metric(metrics, "tierlog_cold_fetch_records_total", topic="cold") > 0
    assert _metric(metrics, "tierlog_fetch_node_proxied_total", target="follower") > 0
    assert _metric(metrics, "tierlog_cold_get_requests_total") > 0
    assert _metric(metrics, "tierlog_cold_cache_hits_total") > 0
    # Extensions mount on the node (consumer groups), topic reads and errors.
    assert node.http.get("/groups").status_code == 200
    assert node.http.get("/topics").json()["topics"][0]["name"] == "cold"
    assert node.http.get("/topics/cold").json()["partitions"][0]["cold"] is not None
    r = node.http.get("/topics/nope/partitions/0/records")
    assert r.status_code == 404 and r.json()["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    r = node.http.get("/topics/cold/partitions/0/records", params={"offset": "x"})
    assert r.status_code == 400 and r.json()["error_code"] == "INVALID_REQUEST"
    r = node.http.get("/topics/cold/partitions/5/records", params={"offset": 0})
    assert r.status_code == 404


def test_offsets_by_timestamp_across_tiers(
    tiered: tuple[Cluster, FetchNodeProcess, str, int],
) -> None:
    cluster, node, _tid, hot_start = tiered
    for http in [cluster.leader("cold").http, node.http]:

        def at(q: str | int, http: httpx.Client = http) -> Any:
            r = http.get("/topics/cold/partitions/0/offsets", params={"at": q})
            assert r.status_code == 200, r.text
            doc = r.json()
            assert doc["log_start_offset"] == 0
            return doc["offset"]

        assert at("earliest") == 0
        assert at("latest") == N
        assert at(0) == 0
        assert at(T_OLD + 5 * 1000) == 5  # cold
        assert at(T_OLD + 5 * 1000 + 1) == 6
        assert at(T_OLD + (hot_start - 1) * 1000) == hot_start - 1  # last cold-only record
        assert at(T_OLD + (N - 2) * 1000 - 10) == N - 2  # hot
        assert at(T_OLD + N * 1000) is None  # newer than everything
        r = http.get("/topics/cold/partitions/0/offsets", params={"at": "soon"})
        assert r.status_code == 400 and r.json()["error_code"] == "INVALID_REQUEST"


def test_below_the_log_start_is_416_naming_the_earliest(
    tiered: tuple[Cluster, FetchNodeProcess, str, int], engine: Engine
) -> None:
    cluster, node, tid, _hot_start = tiered
    manifest = ColdManifest(engine)
    first, second = manifest.files(TopicIdPartition(tid, 0))[:2]
    manifest.start_delete([first.id])  # as cold retention does: the file leaves the table
    start = second.base_offset
    readers = [cluster.leader("cold").http, node.http]

    def refused(http: httpx.Client) -> dict[str, Any] | None:
        r = http.get("/topics/cold/partitions/0/records", params={"offset": 0})
        return r.json() if r.status_code == 416 else None

    for http in readers:
        doc = wait_for("416 below the cold start", lambda http=http: refused(http), timeout=10)
        assert doc["error_code"] == "OFFSET_OUT_OF_RANGE"
        assert doc["log_start_offset"] == start and str(start) in doc["message"]
        r = http.get("/topics/cold/partitions/0/records", params={"offset": start})
        assert r.status_code == 200 and r.json()["records"][0]["offset"] == start
        r = http.get("/topics/cold/partitions/0/offsets", params={"at": "earliest"})
        assert r.json()["offset"] == start
    # Above the log end is 416 too, naming the start across tiers.
    r = cluster.leader("cold").http.get(
        "/topics/cold/partitions/0/records", params={"offset": N + 10}
    )
    assert r.status_code == 416 and r.json()["log_start_offset"] == start
    assert f"log [{start}, {N}]" in r.json()["message"]  # the whole log, not the hot range
