"""TieringWorker against a real Postgres and moto's HTTP S3 server.

Replicas are stand-in HTTP servers that serve segment files at the contract's internal path
(tests/integration/tiering_env.py; the real broker endpoint is covered by the end-to-end test
at the bottom): this lets the tests control which replica has what.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from coldstore.layout import table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.segment_registry import SegmentRegistry
from metadata.topics import TopicRepo
from metadata.types import TopicIdPartition
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.tiering_consistency import files_per_commit
from tests.integration.tiering_env import Env, env_fixture, rec, tricky  # noqa: F401 (fixture)
from tiering.worker import TieringWorker


def test_records_are_tiered_byte_exact_and_once(env: Env) -> None:
    tid = env.topic("orders", 2)
    end = env.add_segment("orders", 0, 0, tricky())
    env.add_segment("orders", 0, end, [rec(i) for i in range(end, end + 10)])
    env.add_segment("orders", 1, 0, [rec(i) for i in range(7)], per_frame=2)
    w = env.worker("w1", row_group_bytes=64 * 1024)
    assert w.run_once() == 3
    assert w.run_once() == 0
    env.assert_exact("orders")
    files = env.manifest.files(TopicIdPartition(tid, 0))
    assert [(f.base_offset, f.last_offset, f.records) for f in files] == [
        (0, end - 1, end),
        (end, end + 9, 10),
    ]
    assert env.manifest.tiered_end_offset(TopicIdPartition(tid, 0)) == end + 10
    assert env.manifest.tiered_end_offset(TopicIdPartition(tid, 1)) == 7
    assert all(s.state == "tiered" for s in env.registry.segments(TopicIdPartition(tid, 0)))
    # manifest and Delta agree on the files; the objects are where the manifest says
    dt_files = DeltaTable(
        table_uri(env.config, "orders"), storage_options=env.config.storage_options()
    ).file_uris()
    keys = {f.object_key for p in (0, 1) for f in env.manifest.files(TopicIdPartition(tid, p))}
    assert {u.split(f"{env.config.bucket}/", 1)[1] for u in dt_files} == keys
    store = ObjectStore(env.config)
    assert all(
        store.head(f.object_key) == f.size_bytes
        for p in (0, 1)
        for f in env.manifest.files(TopicIdPartition(tid, p))
    )
    w.update_lag_metrics()
    w.close()


def test_prefers_a_follower_and_falls_back_to_the_leader(env: Env) -> None:
    tid = env.topic("t", 1)
    part = TopicRepo(env.engine).partitions("t")[0]
    leader = part.leader
    assert leader is not None
    follower = next(i for i in part.isr if i != leader)
    env.add_segment("t", 0, 0, [rec(i) for i in range(5)])
    w = env.worker("w")
    assert w.run_once() == 1
    assert env.replicas[follower].requests and not env.replicas[leader].requests
    # the follower rolled its segment elsewhere (different end): the leader serves it
    env.add_segment("t", 0, 5, [rec(i) for i in range(5, 9)])
    data, _ = env.replicas[follower].segments[("t", 0, 5)]
    env.replicas[follower].segments[("t", 0, 5)] = (data, 99)
    assert w.run_once() == 1
    assert env.replicas[leader].requests
    env.assert_exact("t")
    assert env.manifest.tiered_end_offset(TopicIdPartition(tid, 0)) == 9
    w.close()


def test_a_failure_releases_the_claim_with_the_error_and_is_retried(env: Env) -> None:
    tid = env.topic("t", 1)
    env.add_segment("t", 0, 0, [rec(i) for i in range(5)])
    for r in env.replicas.values():
        r.fail = True
    w = env.worker("w")
    w.registry = env.registry  # short backoff
    assert w.run_once() == 0
    (seg,) = env.registry.segments(TopicIdPartition(tid, 0))
    assert seg.state == "sealed" and seg.attempts == 1
    assert seg.last_error is not None and "HTTP 500" in seg.last_error
    assert (
        env.manifest.files(TopicIdPartition(tid, 0), states=("copy_started", "copied", "committed"))
        == []
    )
    for r in env.replicas.values():
        r.fail = False
    time.sleep(0.3)
    assert w.run_once() == 1
    env.assert_exact("t")
    w.close()


def test_a_partitions_run_of_segments_is_one_commit_and_stops_at_a_failure(env: Env) -> None:
    """One partition, three sealed segments: one claim takes the run and commits it once. If
    the middle one fails, the first is committed alone and the third waits (a later file
    must never enter Delta before an earlier one), then both go in the next commit."""
    tid = env.topic("run", 1)
    base = 0
    for _ in range(3):
        base = env.add_segment("run", 0, base, [rec(i) for i in range(base, base + 4)])
    w = env.worker("w")
    w.registry = env.registry  # short backoff
    assert w.run_once() == 3
    assert files_per_commit(env.config, "run") == [0, 3]
    env.assert_exact("run")

    tid = env.topic("gap", 1)
    bases = [base := 0]
    for _ in range(3):
        base = env.add_segment("gap", 0, base, [rec(i) for i in range(base, base + 4)])
        bases.append(base)
    held = {i: r.segments.pop(("gap", 0, bases[1])) for i, r in env.replicas.items()}
    assert w.run_once() == 1
    segs = env.registry.segments(TopicIdPartition(tid, 0))
    assert [s.state for s in segs] == ["tiered", "sealed", "sealed"]
    assert segs[1].last_error is not None and segs[2].last_error is None
    assert files_per_commit(env.config, "gap") == [0, 1]
    for i, r in env.replicas.items():
        r.segments[("gap", 0, bases[1])] = held[i]
    time.sleep(0.3)  # the failed segment's backoff
    assert w.run_once() == 2
    assert files_per_commit(env.config, "gap") == [0, 1, 2]
    env.assert_exact("gap")  # (the same offsets and records as "run")
    w.close()


def test_two_concurrent_workers_tier_every_offset_once(env: Env) -> None:
    tid = env.topic("busy", 4)
    for p in range(4):
        base = 0
        for s in range(3):
            base = env.add_segment("busy", p, base, [rec(i) for i in range(base, base + 4 + s)])
    done: list[int] = []
    barrier = threading.Barrier(2)

    def run(name: str) -> None:
        w = env.worker(name)
        barrier.wait()
        for _ in range(20):
            done.append(w.run_once())
            if sum(done) == 12:
                break
        w.close()

    threads = [threading.Thread(target=run, args=(f"w{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(done) == 12
    env.assert_exact("busy")
    files = [f for p in range(4) for f in env.manifest.files(TopicIdPartition(tid, p))]
    assert len(files) == 12 and len({f.object_key for f in files}) == 12
    every = [
        f
        for p in range(4)
        for f in env.manifest.files(TopicIdPartition(tid, p), states=("copy_started", "copied"))
    ]
    assert every == []


# -- end to end: real broker processes register and serve the segments ----------------------


def _b64(b: bytes | None) -> str | None:
    import base64

    return None if b is None else base64.b64encode(b).decode()


def test_end_to_end_with_real_brokers(
    fresh_db: str, tmp_path: Path, s3_bucket: ObjectStoreConfig
) -> None:
    """Produce to a real 3-broker cluster (RF 3, tiny segments) → the leader registers sealed
    segments → a worker downloads each from a replica over HTTP → Delta holds every produced
    record byte-exact, once, and the manifest agrees."""
    from metadata.db import make_engine
    from tests.integration.cluster import Cluster, wait_for

    cluster = Cluster(fresh_db, tmp_path, 3, ["--log-level", "INFO"]).start()
    engine = make_engine(fresh_db)
    try:
        r = cluster.any().http.post(
            "/topics",
            json={
                "name": "e2e",
                "partitions": 2,
                "replication_factor": 3,
                "configs": {"segment.bytes": 1024, "max.message.bytes": 4 << 20},
            },
        )
        assert r.status_code == 201, r.text
        tid = str(r.json()["id"])
        for p in (0, 1):
            wait_for("replicas ready", lambda p=p: len(cluster.partition("e2e", p)["isr"]) == 3)
        expected: dict[tuple[int, int], dict[str, Any]] = {}
        for p in (0, 1):
            for want in tricky():
                body: dict[str, Any] = {
                    "partition": p,
                    "key_b64": _b64(want["key"]),
                    "value_b64": _b64(want["value"]),
                    "timestamp": want["ts"],
                }
                if want["headers"]:
                    body["headers"] = [
                        {"key": h["key"], "value_b64": _b64(h["value"])} for h in want["headers"]
                    ]
                (off,) = cluster.produce("e2e", [body], p)
                assert off["partition"] == p
                expected[(p, off["offset"])] = want
            # a filler frame, so every record above sits in a sealed segment
            cluster.produce("e2e", [{"partition": p, "value": "filler"}], p)
        ends = {p: max(o for q, o in expected if q == p) + 1 for p in (0, 1)}
        registry = SegmentRegistry(engine)
        wait_for(
            "sealed segments registered",
            lambda: all(
                (segs := registry.segments(TopicIdPartition(tid, p)))
                and max(s.end_offset for s in segs) >= ends[p]
                for p in (0, 1)
            ),
        )
        worker = TieringWorker(engine, s3_bucket, "e2e-worker")
        manifest = ColdManifest(engine)

        def tiered() -> bool:
            worker.run_once()
            return all(
                (manifest.tiered_end_offset(TopicIdPartition(tid, p)) or 0) >= ends[p]
                for p in (0, 1)
            )

        wait_for("segments tiered", tiered, timeout=60, every=0.5)
        worker.close()
        t = DeltaTable(table_uri(s3_bucket, "e2e"), storage_options=s3_bucket.storage_options())
        rows = [
            row
            for row in t.to_pyarrow_table().to_pylist()
            if (row["partition"], row["offset"]) in expected
        ]
        keys = [(row["partition"], row["offset"]) for row in rows]
        assert sorted(keys) == sorted(expected) and len(set(keys)) == len(keys)
        for row in rows:
            want = expected[(row["partition"], row["offset"])]
            assert (row["key"], row["value"]) == (want["key"], want["value"])
            assert (row["headers"] or None) == (want["headers"] or None)
            assert row["timestamp"].timestamp() * 1000 == want["ts"]
        for p in (0, 1):
            files = manifest.files(TopicIdPartition(tid, p))
            segs = registry.segments(TopicIdPartition(tid, p))
            tiered_segs = [s for s in segs if s.state == "tiered"]
            assert [(f.base_offset, f.last_offset + 1) for f in files] == [
                (s.base_offset, s.end_offset) for s in tiered_segs
            ]
    finally:
        cluster.stop()
        engine.dispose()


def test_each_segment_tiered_logs_one_info_line(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 18: four INFO lines per tiered segment drowned the log; its steps are DEBUG now,
    and the one INFO line carries the segment's fields."""
    env.topic("quiet", 1)
    end = env.add_segment("quiet", 0, 0, [rec(i) for i in range(5)])
    env.add_segment("quiet", 0, end, [rec(i) for i in range(end, end + 5)])
    w = env.worker("w-quiet")
    with caplog.at_level(logging.INFO):
        assert w.run_once() == 2
    w.close()
    ours = ("tiering", "coldstore", "metadata")
    info = [r for r in caplog.records if r.name.startswith(ours) and r.levelno == logging.INFO]
    assert [r.getMessage() for r in info] == ["segment tiered", "segment tiered"]
    assert [getattr(r, "records", None) for r in info] == [5, 5]
