"""Search across both tiers on real parts: two broker processes each leading one partition of
a topic whose older segments are tiered to moto's S3 and deleted locally, a tiering worker
in-process, Postgres. A search from either broker finds records in the cold files (read
from S3) and the hot logs, its own partition's and (one hop) the other broker's."""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy.engine import Engine

from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.types import TopicIdPartition
from tests.integration.cluster import Cluster, wait_for
from tests.integration.fetch_nodes import FetchNodeProcess, s3_env
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tiering.worker import TieringWorker

T_OLD = int(time.time() * 1000) - 3600_000  # an hour ago: local retention deletes at once
N = 240  # records, half in each partition


def record(i: int) -> dict[str, Any]:
    """Record i: partition i % 2, key k{i % 7}, a JSON value (binary every 10th)."""
    rec: dict[str, Any] = {"key": f"k{i % 7}", "timestamp": T_OLD + i * 1000}
    if i % 10 == 9:
        rec["value_b64"] = "AP8" + "ABCD"[i % 4]  # bytes 00 ff ..: not text
    else:
        rec["value"] = {"id": i, "kind": "even" if i % 4 < 2 else "odd", "note": f"note-{i}"}
    if i % 5 == 0:
        rec["headers"] = {"source": "test"}
    return rec


def offset_of(i: int) -> int:
    return i // 2  # records alternate partitions, so each partition's offsets are i // 2


@pytest.fixture(scope="module")
def search_db(db_factory: Callable[..., str]) -> str:
    return db_factory()


@pytest.fixture(scope="module")
def cluster(
    search_db: str, tmp_path_factory: pytest.TempPathFactory, moto_s3: MotoServer
) -> Iterator[Cluster]:
    bucket = new_bucket(moto_s3)
    tmp = tmp_path_factory.mktemp("search")
    engine = make_engine(search_db)
    with pytest.MonkeyPatch.context() as mp:
        for k, v in s3_env(bucket).items():
            mp.setenv(k, v)
        c = Cluster(search_db, tmp, 2).start()
        try:
            _load(c, engine, bucket)
            c.fetch_node = FetchNodeProcess(search_db, tmp / "fetch.log", s3_env(bucket)).start()  # type: ignore[attr-defined]
            yield c
        finally:
            node = getattr(c, "fetch_node", None)
            if node is not None:
                node.stop()
            c.stop()
            engine.dispose()


def _load(c: Cluster, engine: Engine, bucket: Any) -> None:
    r = c.any().http.post(
        "/topics",
        json={
            "name": "s",
            "partitions": 2,
            "replication_factor": 1,
            "configs": {"segment.bytes": 8192, "local.retention.ms": 1000},
        },
    )
    assert r.status_code == 201, r.text
    tid = str(r.json()["id"])
    for p in (0, 1):
        wait_for("a leader", lambda p=p: c.partition("s", p)["leader"])  # type: ignore[misc]
    for lo in range(0, N, 12):
        for p in (0, 1):
            c.produce("s", [record(i) for i in range(lo, lo + 12) if i % 2 == p], partition=p)
    manifest = ColdManifest(engine)
    worker = TieringWorker(engine, bucket, "search-worker")
    try:

        def tiered() -> bool:
            worker.run_once()
            ends = [manifest.tiered_end_offset(TopicIdPartition(tid, p)) or 0 for p in (0, 1)]
            return min(ends) >= N // 4

        wait_for("half of each partition tiered", tiered, timeout=90, every=0.3)
    finally:
        worker.close()
    wait_for(
        "tiered segments deleted locally",
        lambda: all(c.partition("s", p)["hot"]["start"] >= N // 8 for p in (0, 1)),
        timeout=30,
    )


def search(http: httpx.Client, topic: str = "s", **params: Any) -> list[dict[str, Any]]:
    with http.stream("GET", f"/topics/{topic}/search", params=params) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("application/x-ndjson")
        return [orjson.loads(line) for line in r.iter_lines() if line]


def hits(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [x for x in lines if x["type"] == "hit"]


def test_key_history_across_tiers_and_brokers(cluster: Cluster) -> None:
    """Every record of a key, in both partitions (one led elsewhere), cold and hot."""
    want = [i for i in range(N) if i % 7 == 3]
    for broker in cluster.brokers.values():
        lines = search(broker.http, key="k3", max_hits=1000)
        got = hits(lines)
        assert sorted((h["partition"], h["offset"]) for h in got) == sorted(
            (i % 2, offset_of(i)) for i in want
        )
        for p in (0, 1):  # each partition's hits come in offset order
            offs = [h["offset"] for h in got if h["partition"] == p]
            assert offs == sorted(offs)
        by_offset = {(h["partition"], h["offset"]): h for h in got}
        for i in want:
            h = by_offset[(i % 2, offset_of(i))]
            assert h["key"] == "k3" and h["timestamp"] == T_OLD + i * 1000
            if i % 10 == 9:
                assert h["value_b64"].startswith("AP8")
            else:
                assert h["value"]["id"] == i
            assert h["headers"] == ({"source": "test"} if i % 5 == 0 else {})
        assert {h["tier"] for h in got} == {"cold", "hot"}
        done = lines[-1]
        assert done["type"] == "done" and done["hits"] == len(want) and not done["capped"]
        assert done["errors"] == 0 and done["partitions_done"] == done["partitions"] == 2
        assert done["bytes_scanned"] > 0 and done["files_scanned"] == done["files_total"] > 0
        # The table's bytes read, each once: never more than the table holds (issue 27 S12;
        # bytes_scanned adds the hot records and footer reads that overlap column chunks).
        assert 0 < done["cold_bytes_scanned"] <= done["bytes_total"] <= done["table_bytes"]
        assert any(x["type"] == "progress" for x in lines[:-1])


def test_value_substring_json_field_bounds_and_cap(cluster: Cluster) -> None:
    http = cluster.any().http
    got = hits(search(http, value="note-13", partition=1))
    want = [i for i in range(1, N, 2) if str(i).startswith("13") and i % 10 != 9]
    assert [(h["offset"], h["value"]["id"]) for h in got] == [(offset_of(i), i) for i in want]
    kind = hits(search(http, json_path="kind", json_value="odd", max_hits=1000))
    assert sorted(h["value"]["id"] for h in kind) == [
        i for i in range(N) if i % 4 >= 2 and i % 10 != 9
    ]
    by_b64 = hits(search(http, key_b64=base64.b64encode(b"k3").decode(), max_hits=1000))
    assert len(by_b64) == len([i for i in range(N) if i % 7 == 3])
    num = hits(search(http, json_path="$.id", json_value="42"))
    assert [(h["partition"], h["value"]["id"]) for h in num] == [(0, 42)]
    assert hits(search(http, json_path="id", json_value='"42"')) == []  # a string is not 42
    # Offset and time bounds ([start, end)), and the cap across partitions.
    lo, hi = 10, 40
    bounded = hits(search(http, key="k1", start_offset=lo, end_offset=hi, max_hits=1000))
    assert sorted((h["partition"], h["offset"]) for h in bounded) == sorted(
        (i % 2, offset_of(i)) for i in range(N) if i % 7 == 1 and lo <= offset_of(i) < hi
    )
    t0, t1 = T_OLD + 100_000, T_OLD + 120_000
    timed = hits(search(http, key="k2", start_timestamp=t0, end_timestamp=t1))
    assert sorted(h["timestamp"] for h in timed) == [
        T_OLD + i * 1000 for i in range(100, 120) if i % 7 == 2
    ]
    lines = search(http, value="note", max_hits=5)
    assert len(hits(lines)) == 5 and lines[-1]["capped"] and lines[-1]["hits"] == 5


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({}, 400, "INVALID_REQUEST"),
        ({"key": "a", "key_b64": "YQ=="}, 400, "INVALID_REQUEST"),
        ({"key_b64": "not base64!"}, 400, "INVALID_REQUEST"),
        ({"json_path": "a"}, 400, "INVALID_REQUEST"),
        ({"json_path": "a..b", "json_value": "1"}, 400, "INVALID_REQUEST"),
        ({"json_path": "a", "json_value": "{}"}, 400, "INVALID_REQUEST"),
        ({"key": "a", "start_offset": "9", "end_offset": "3"}, 400, "INVALID_REQUEST"),
        ({"key": "a", "max_hits": "0"}, 400, "INVALID_REQUEST"),
        ({"key": "a", "partition": "7"}, 404, "UNKNOWN_TOPIC_OR_PARTITION"),
        ({"key": "a", "value_format": "xml"}, 400, "INVALID_REQUEST"),
    ],
)
def test_bad_searches_are_refused(
    cluster: Cluster, params: dict[str, str], status: int, code: str
) -> None:
    r = cluster.any().http.get("/topics/s/search", params=params)
    assert r.status_code == status, r.text
    assert r.json()["error_code"] == code


def test_unknown_topic_and_early_close(cluster: Cluster) -> None:
    http = cluster.any().http
    r = http.get("/topics/nope/search", params={"key": "a"})
    assert r.status_code == 404 and r.json()["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    # A client that leaves after the first line cancels its search; the broker goes on.
    with http.stream("GET", "/topics/s/search", params={"value": "note"}) as r:
        assert r.status_code == 200
        next(r.iter_lines())
    assert len(hits(search(http, key="k0", max_hits=1000))) == len(range(0, N, 7))


def test_cli_search_prints_hits_and_a_summary(cluster: Cluster) -> None:
    url = cluster.any().url
    run = subprocess.run(
        [sys.executable, "-m", "tierlog", "search", "s", "--history", "k5", "--url", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    got = [orjson.loads(line) for line in run.stdout.splitlines()]
    assert sorted((h["partition"], h["offset"]) for h in got) == sorted(
        (i % 2, offset_of(i)) for i in range(N) if i % 7 == 5
    )
    assert f"{len(got)} hits" in run.stderr and "ms" in run.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "tierlog", "search", "nope", "--key", "a", "--url", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in bad.stderr


def test_a_fetch_node_searches_cold_files_itself_and_the_hot_log_through_leaders(
    cluster: Cluster,
) -> None:
    node: FetchNodeProcess = cluster.fetch_node  # type: ignore[attr-defined]
    before = node.http.get("/metrics").text.count("tierlog_cold_search_files_total 0.0")
    lines = search(node.http, key="k3", max_hits=1000)
    got = sorted((h["partition"], h["offset"], h["tier"]) for h in hits(lines))
    via_broker = search(cluster.any().http, key="k3", max_hits=1000)
    assert got == sorted((h["partition"], h["offset"], h["tier"]) for h in hits(via_broker))
    done = lines[-1]
    assert done["errors"] == 0 and done["files_scanned"] == done["files_total"] > 0
    assert done["hot_records_scanned"] == done["hot_records_total"] > 0
    assert (
        before == 1 and "tierlog_cold_search_files_total 0.0" not in node.http.get("/metrics").text
    )  # the node read the cold files itself
    capped = search(node.http, value="note", max_hits=3)
    assert len(hits(capped)) == 3 and capped[-1]["capped"]
