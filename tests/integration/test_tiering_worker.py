"""TieringWorker against a real Postgres and moto's HTTP S3 server.

Replicas are stand-in HTTP servers that serve segment files at the contract's internal path
(the real broker endpoint is covered by test_tiering_e2e.py): this lets the tests control
which replica has what, and kill a worker mid-upload deterministically.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from sqlalchemy.engine import Engine

from compaction.jobs import Settings
from compaction.worker import CompactionWorker
from logformat.frame import encode_frame
from logformat.records import build_batch
from metadata.brokers import BrokerRepo
from metadata.cold_manifest import ColdManifest
from metadata.manifest import SegmentRegistry
from metadata.partition_state import PartitionStateRepo
from metadata.topics import TopicRepo
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tiering.layout import table_uri
from tiering.object_store import ObjectStore, ObjectStoreConfig
from tiering.worker import TieringWorker

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000
BIG = bytes(range(256)) * 4096  # a 1 MiB value with every byte value


class Replica:
    """A broker's segment endpoint: GET /internal/topics/{t}/partitions/{p}/segments/{base}."""

    def __init__(self, secret: str) -> None:
        self.segments: dict[tuple[str, int, int], tuple[bytes, int]] = {}
        self.requests: list[str] = []
        self.fail = False
        replica = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                replica.requests.append(url.path)
                parts = url.path.strip("/").split("/")
                end = parse_qs(url.query).get("end_offset")
                seg = replica.segments.get((parts[2], int(parts[4]), int(parts[6])))
                if replica.fail:
                    status, body = 500, b'{"error": "boom"}'
                elif self.headers.get("x-tierlog-cluster-token") != secret:
                    status, body = 403, b"{}"
                elif seg is None or (end and int(end[0]) != seg[1]):
                    status, body = 404, b'{"error": "NOT_FOUND"}'
                else:
                    status, body = 200, seg[0]
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Env:
    def __init__(self, engine: Engine, config: ObjectStoreConfig) -> None:
        self.engine, self.config = engine, config
        secret = PartitionStateRepo(engine).cluster_secret()
        self.replicas = {i: Replica(secret) for i in (1, 2)}
        for i, r in self.replicas.items():
            BrokerRepo(engine).register(i, r.url, 600_000)
        self.registry = SegmentRegistry(engine, backoff_ms=100, max_backoff_ms=200)
        self.manifest = ColdManifest(engine)
        self.expected: dict[tuple[int, int], dict[str, Any]] = {}

    def topic(self, name: str, partitions: int) -> str:
        return TopicRepo(self.engine).create(name, partitions, 2).id

    def add_segment(
        self, topic: str, partition: int, base: int, recs: list[dict[str, Any]], per_frame: int = 3
    ) -> int:
        """Serve a sealed segment on both replicas and register it; returns its end offset."""
        frames, offset = [], base
        for i in range(0, len(recs), per_frame):
            chunk = recs[i : i + per_frame]
            batch = build_batch(
                [r["key"] for r in chunk],
                [r["value"] for r in chunk],
                [r["headers"] for r in chunk],
                [r["ts"] for r in chunk],
                T0,
            )
            frames.append(bytes(encode_frame(batch, base_offset=offset, compression="zstd")))
            for r in chunk:
                self.expected[(partition, offset)] = r
                offset += 1
        data = b"".join(frames)
        for r in self.replicas.values():
            r.segments[(topic, partition, base)] = (data, offset)
        tid = TopicRepo(self.engine).get(topic)
        assert tid is not None
        self.registry.register_sealed(tid.id, partition, base, offset, len(data))
        return offset

    def worker(self, name: str, **kw: Any) -> TieringWorker:
        return TieringWorker(self.engine, self.config, name, **kw)

    def delta_rows(self, topic: str) -> list[dict[str, Any]]:
        t = DeltaTable(table_uri(self.config, topic), storage_options=self.config.storage_options())
        table = t.to_pyarrow_table()
        # delta-rs reads timestamps as microseconds; the files hold milliseconds
        table = table.set_column(
            table.schema.get_field_index("timestamp"),
            "timestamp",
            pc.cast(table.column("timestamp"), pa.timestamp("ms", "UTC")),
        )
        return table.sort_by([("partition", "ascending"), ("offset", "ascending")]).to_pylist()

    def assert_exact(self, topic: str) -> None:
        rows = self.delta_rows(topic)
        keys = [(r["partition"], r["offset"]) for r in rows]
        assert len(keys) == len(set(keys)), "an offset was tiered twice"
        assert sorted(keys) == sorted(self.expected)
        for r in rows:
            want = self.expected[(r["partition"], r["offset"])]
            assert r["key"] == want["key"]
            assert r["value"] == want["value"]
            assert r["headers"] == want["headers"]
            assert r["timestamp"] == dt.datetime.fromtimestamp(want["ts"] / 1000, dt.UTC)


@pytest.fixture
def env(db_engine: Engine, s3_bucket: ObjectStoreConfig) -> Iterator[Env]:
    e = Env(db_engine, s3_bucket)
    yield e
    for r in e.replicas.values():
        r.server.shutdown()


def rec(i: int, **kw: Any) -> dict[str, Any]:
    r = {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "headers": None, "ts": T0 + i}
    r.update(kw)
    return r


def tricky() -> list[dict[str, Any]]:
    return [
        rec(0, key=b"\x00\xff\x80binary", value=bytes(range(256))),
        rec(1, key=None, value=b"no key"),
        rec(2, value=None),  # a tombstone
        rec(3, headers=[{"key": "h1", "value": b"\x00\x01"}, {"key": "ünï", "value": b""}]),
        rec(4, key="ключ 🔑".encode(), value="värde ✓ 日本".encode()),
        rec(5, value=BIG),
        rec(6, key=b"", value=b"", headers=[]),
        rec(7, ts=T0 - 5000),  # timestamps need not be ordered
    ]


def test_records_are_tiered_byte_exact_and_once(env: Env) -> None:
    tid = env.topic("orders", 2)
    end = env.add_segment("orders", 0, 0, tricky())
    env.add_segment("orders", 0, end, [rec(i) for i in range(end, end + 10)])
    env.add_segment("orders", 1, 0, [rec(i) for i in range(7)], per_frame=2)
    w = env.worker("w1", row_group_bytes=64 * 1024)
    assert w.run_once() == 3
    assert w.run_once() == 0
    env.assert_exact("orders")
    files = env.manifest.files(tid, 0)
    assert [(f.base_offset, f.last_offset, f.records) for f in files] == [
        (0, end - 1, end),
        (end, end + 9, 10),
    ]
    assert env.manifest.tiered_end_offset(tid, 0) == end + 10
    assert env.manifest.tiered_end_offset(tid, 1) == 7
    assert all(s.state == "tiered" for s in env.registry.segments(tid, 0))
    # manifest and Delta agree on the files; the objects are where the manifest says
    dt_files = DeltaTable(
        table_uri(env.config, "orders"), storage_options=env.config.storage_options()
    ).file_uris()
    keys = {f.object_key for p in (0, 1) for f in env.manifest.files(tid, p)}
    assert {u.split(f"{env.config.bucket}/", 1)[1] for u in dt_files} == keys
    store = ObjectStore(env.config)
    assert all(
        store.head(f.object_key) == f.size_bytes for p in (0, 1) for f in env.manifest.files(tid, p)
    )
    w.update_lag_metrics()
    w.close()


def test_a_topic_deleted_and_created_again_gets_a_table_of_its_own(env: Env) -> None:
    """The worker caches tables by topic id: after the old table was deleted (compaction's
    purge) a new topic of the same name must not be committed through the old snapshot."""
    old = env.topic("again", 1)
    end = env.add_segment("again", 0, 0, [rec(i) for i in range(10)])
    env.add_segment("again", 0, end, [rec(i) for i in range(end, end + 10)])
    w = env.worker("w1")
    assert w.run_once() == 2
    TopicRepo(env.engine).delete("again")
    purger = CompactionWorker(env.engine, env.config, "purge", Settings(min_grace_ms=0))
    assert purger.run_once().purged_topics == 1
    purger.close()
    new = env.topic("again", 1)
    assert new != old
    env.expected = {}
    env.add_segment("again", 0, 0, [rec(i, value=b"new-%d" % i) for i in range(5)])
    assert w.run_once() == 1
    env.assert_exact("again")  # only the new topic's five records
    (f,) = env.manifest.files(new, 0)
    assert ObjectStore(env.config).head(f.object_key) == f.size_bytes
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
    assert env.manifest.tiered_end_offset(tid, 0) == 9
    w.close()


def test_a_failure_releases_the_claim_with_the_error_and_is_retried(env: Env) -> None:
    tid = env.topic("t", 1)
    env.add_segment("t", 0, 0, [rec(i) for i in range(5)])
    for r in env.replicas.values():
        r.fail = True
    w = env.worker("w")
    w.registry = env.registry  # short backoff
    assert w.run_once() == 0
    (seg,) = env.registry.segments(tid, 0)
    assert seg.state == "sealed" and seg.attempts == 1
    assert seg.last_error is not None and "HTTP 500" in seg.last_error
    assert env.manifest.files(tid, 0, states=("copy_started", "copied", "committed")) == []
    for r in env.replicas.values():
        r.fail = False
    time.sleep(0.3)
    assert w.run_once() == 1
    env.assert_exact("t")
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
    files = [f for p in range(4) for f in env.manifest.files(tid, p)]
    assert len(files) == 12 and len({f.object_key for f in files}) == 12
    every = [
        f for p in range(4) for f in env.manifest.files(tid, p, states=("copy_started", "copied"))
    ]
    assert every == []


KILLED_WORKER = """
import os, sys
from metadata.db import make_engine
from tiering.object_store import ObjectStore, ObjectStoreConfig
from tiering.worker import TieringWorker

def put_then_die(self, key, data):
    # start a multipart upload, send one part, and die like kill -9 in the middle of it
    up = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)
    self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=up["UploadId"],
                            PartNumber=1, Body=b"x" * (5 << 20))
    os._exit(9)

ObjectStore.put = put_then_die
config = ObjectStoreConfig(bucket=sys.argv[2], prefix=sys.argv[3], endpoint_url=sys.argv[4],
                           access_key_id="testing", secret_access_key="testing")
TieringWorker(make_engine(sys.argv[1]), config, "doomed", lease_ms=5000).run_once()
"""


def test_a_worker_killed_mid_upload_is_taken_over(env: Env, fresh_db: str) -> None:
    tid = env.topic("t", 1)
    env.add_segment("t", 0, 0, tricky())
    c = env.config
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_WORKER, fresh_db, c.bucket, c.prefix, str(c.endpoint_url)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 9, proc.stderr.decode()[-2000:]
    (seg,) = env.registry.segments(tid, 0)
    assert (seg.state, seg.claimed_by) == ("tiering", "doomed")
    (abandoned,) = env.manifest.files(tid, 0, states=("copy_started",))
    assert env.manifest.files(tid, 0) == []  # nothing committed
    w = env.worker("rescuer")
    assert w.run_once() == 0  # the claim's lease (5 s) is still running
    deadline = time.monotonic() + 30
    while (done := w.run_once()) == 0 and time.monotonic() < deadline:
        time.sleep(0.5)  # until the lease lapses and the rescuer takes the segment over
    assert done == 1
    env.assert_exact("t")
    (committed,) = env.manifest.files(tid, 0)
    assert committed.object_key != abandoned.object_key
    gone = env.manifest.get(abandoned.id)
    assert gone is not None and gone.state == "deleted"
    w.close()
    # The dead worker's multipart upload is still open, its part stored: compaction aborts it.
    store = ObjectStore(c)
    topics = c.key("topics") + "/"
    assert [u.key for u in store.incomplete_uploads(topics)] == [abandoned.object_key]
    # (moto dates every upload 2010, so the age rule is in tests/unit/compaction.)
    sweeper = CompactionWorker(env.engine, c, "c2", Settings(min_grace_ms=0, stale_upload_ms=0))
    assert sweeper.run_once().aborted_uploads == 1
    assert list(store.incomplete_uploads(topics)) == []
    assert sweeper.run_once().aborted_uploads == 0  # next listing only after upload_check_s
    sweeper.close()


def test_a_lapsed_worker_that_committed_to_delta_first_wins_the_manifest(env: Env) -> None:
    """Worker A commits its file to Delta but loses its lease before the manifest commit;
    worker B takes over: Delta keeps A's file, and the manifest must record A's file too."""
    tid = env.topic("t", 1)
    env.add_segment("t", 0, 0, [rec(i) for i in range(6)])
    a, b = env.worker("a", lease_ms=300), env.worker("b")
    b_done = threading.Event()
    real = a.registry.mark_tiered

    def late_mark_tiered(*args: Any, **kw: Any) -> Any:
        b_done.wait(30)  # A stalls (GC pause, network) past its lease while B works
        return real(*args, **kw)

    a.registry.mark_tiered = late_mark_tiered  # type: ignore[method-assign]
    result: list[int] = []
    ta = threading.Thread(target=lambda: result.append(a.run_once()))
    ta.start()
    deadline = time.monotonic() + 30
    while not b.run_once():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    b_done.set()
    ta.join()
    assert result == [0]  # A found its claim lost
    (f,) = env.manifest.files(tid, 0)
    dt_files = DeltaTable(
        table_uri(env.config, "t"), storage_options=env.config.storage_options()
    ).file_uris()
    assert [u.split(f"{env.config.bucket}/", 1)[1] for u in dt_files] == [f.object_key]
    assert ObjectStore(env.config).head(f.object_key) == f.size_bytes
    env.assert_exact("t")
    a.close()
    b.close()


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
                (segs := registry.segments(tid, p)) and max(s.end_offset for s in segs) >= ends[p]
                for p in (0, 1)
            ),
        )
        worker = TieringWorker(engine, s3_bucket, "e2e-worker")
        manifest = ColdManifest(engine)

        def tiered() -> bool:
            worker.run_once()
            return all((manifest.tiered_end_offset(tid, p) or 0) >= ends[p] for p in (0, 1))

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
            files = manifest.files(tid, p)
            segs = registry.segments(tid, p)
            tiered_segs = [s for s in segs if s.state == "tiered"]
            assert [(f.base_offset, f.last_offset + 1) for f in files] == [
                (s.base_offset, s.end_offset) for s in tiered_segs
            ]
    finally:
        cluster.stop()
        engine.dispose()
