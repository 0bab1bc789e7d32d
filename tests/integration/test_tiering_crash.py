"""Crash safety of the tiering worker: SIGKILL at each step between the upload and the manifest.

The worker runs in a child process whose script monkeypatches one step to kill the process
(SIGKILL: no cleanup, no atexit, sockets cut) right after it; production code has no fault
flags. A new worker then takes over once the dead worker's claim lease lapses, and the table,
the manifest and the bucket must agree, with every offset in the table exactly once.

    after_upload        the data file is in S3, its manifest row copy_started, not in Delta
    after_delta_commit  the file is in Delta, the manifest row still copied (invisible)
    in_manifest_tx      killed inside mark_tiered's transaction, after the committed row's
                        upsert: Postgres rolls the transaction back (same state as above)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine

from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import table_key, table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from metadata.segment_registry import COLD_STATES
from metadata.types import TopicIdPartition
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.tiering_consistency import all_rows, assert_consistent
from tests.integration.tiering_env import ROOT, Env, rec, tricky

LEASE_MS = 1000

CRASHING_WORKER = """
import os, signal, sys
from sqlalchemy import event
from metadata.db import make_engine
from coldstore.delta_table import DeltaTopicTable
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from tiering.worker import TieringWorker

url, bucket, prefix, endpoint, point, nth, lease_ms = sys.argv[1:8]
calls = [0]

def maybe_die():
    calls[0] += 1
    if calls[0] == int(nth):  # the segments before this one are tiered normally
        os.kill(os.getpid(), signal.SIGKILL)

engine = make_engine(url)
if point == "after_upload":
    real_put = ObjectStore.put
    def put(self, key, data):
        size = real_put(self, key, data)
        maybe_die()
        return size
    ObjectStore.put = put
elif point == "after_delta_commit":
    real_commit = DeltaTopicTable.commit_file
    def commit_file(self, *args, **kw):
        version = real_commit(self, *args, **kw)
        maybe_die()
        return version
    DeltaTopicTable.commit_file = commit_file
elif point == "in_manifest_tx":
    @event.listens_for(engine, "after_cursor_execute")
    def after_execute(conn, cursor, statement, *rest):
        # mark_tiered's upsert of the committed row ran; its transaction is still open
        if statement.startswith("INSERT INTO cold_files") and "ON CONFLICT" in statement:
            maybe_die()
else:
    raise SystemExit(f"unknown crash point {point}")
config = ObjectStoreConfig(bucket=bucket, prefix=prefix, endpoint_url=endpoint,
                           access_key_id="testing", secret_access_key="testing")
TieringWorker(engine, config, "doomed", lease_ms=int(lease_ms)).run_once()
raise SystemExit(3)  # the crash point was never reached
"""


@pytest.fixture
def env(db_engine: Engine, s3_bucket: ObjectStoreConfig) -> Iterator[Env]:
    e = Env(db_engine, s3_bucket)
    yield e
    for r in e.replicas.values():
        r.server.shutdown()


def _run_crashing_worker(env: Env, db_url: str, point: str, nth: int) -> None:
    c = env.config
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            CRASHING_WORKER,
            db_url,
            c.bucket,
            c.prefix,
            str(c.endpoint_url),
            point,
            str(nth),
            str(LEASE_MS),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-3000:]


@pytest.mark.parametrize("nth", [1, 3], ids=["first-segment", "third-segment"])
@pytest.mark.parametrize("point", ["after_upload", "after_delta_commit", "in_manifest_tx"])
def test_a_worker_killed_between_upload_and_manifest_is_recovered(
    env: Env, fresh_db: str, point: str, nth: int
) -> None:
    tid = env.topic("t", 2)
    # Two segments per partition, claimed p0 s0, p1 s0, p0 s1, p1 s1. The doomed worker dies
    # on its first (the table does not exist yet) or on its third (p0's second segment: the
    # partition's Delta txn already holds an earlier commit) after tiering the ones before.
    ends = {
        p: env.add_segment("t", p, 0, tricky() if p == 0 else [rec(i) for i in range(5)])
        for p in (0, 1)
    }
    for p in (0, 1):
        env.add_segment("t", p, ends[p], [rec(i) for i in range(ends[p], ends[p] + 7)])
    _run_crashing_worker(env, fresh_db, point, nth)

    # -- just after the crash: the attempt is abandoned mid-way and invisible ----------------
    crashed = [
        s
        for p in (0, 1)
        for s in env.registry.segments(TopicIdPartition(tid, p))
        if s.state == "tiering" and s.claimed_by == "doomed"
    ]
    assert len(crashed) == 1, crashed
    seg = crashed[0]
    assert (seg.partition, seg.base_offset) == (0, 0 if nth == 1 else ends[0])
    tiered = [s for p in (0, 1) for s in env.registry.segments(TopicIdPartition(tid, p))]
    tiered = [s for s in tiered if s.state == "tiered"]
    assert len(tiered) == nth - 1
    attempt = [
        r
        for r in all_rows(env.engine, tid, 2)
        if (r.partition, r.base_offset) == (seg.partition, seg.base_offset)
    ]
    assert len(attempt) == 1, attempt
    abandoned = attempt[0]
    assert abandoned.state == ("copy_started" if point == "after_upload" else "copied")
    store = ObjectStore(env.config)
    assert store.head(abandoned.object_key) == abandoned.size_bytes  # the upload completed
    # readers (committed rows only) do not see it
    assert all(f.base_offset != seg.base_offset for f in env.manifest.files(seg.tp))
    assert env.manifest.tiered_end_offset(seg.tp) in (None, seg.base_offset)
    table = DeltaTopicTable(table_uri(env.config, "t"), env.config.storage_options(), topic="t")
    root = table_key(env.config, "t")
    # (killed before its first commit, the worker may not even have created the table)
    in_delta = {f"{root}/{f.path}" for f in table.files()} if table.exists() else set()
    assert (abandoned.object_key in in_delta) == (point != "after_upload")

    # -- restart: a new worker takes the segment over once the dead one's lease lapses -------
    rescuer = env.worker("rescuer", lease_ms=10_000)
    deadline = time.monotonic() + 60
    while not all(
        s.state == "tiered" for p in (0, 1) for s in env.registry.segments(TopicIdPartition(tid, p))
    ):
        assert time.monotonic() < deadline, "the crashed segment was never taken over"
        if rescuer.run_once() == 0:
            time.sleep(0.2)
    rescuer.close()

    assert_consistent(env.engine, env.config, "t", tid, 2)
    env.assert_exact("t")
    rows = {r.object_key: r for r in all_rows(env.engine, tid, 2)}
    (final,) = [r for r in env.manifest.files(seg.tp) if r.base_offset == seg.base_offset]
    if point == "after_upload":
        # Never in Delta: the rescuer's own upload is committed, the abandoned one deleted.
        assert final.object_key != abandoned.object_key
        assert rows[abandoned.object_key].state == "deleted"
    else:
        # Delta kept the dead worker's file: the manifest records that one, and the
        # rescuer's redundant upload (never in Delta) is deleted.
        assert final.object_key == abandoned.object_key
        redundant = [
            r
            for r in rows.values()
            if (r.partition, r.base_offset) == (seg.partition, seg.base_offset)
            and r.object_key != abandoned.object_key
        ]
        assert [r.state for r in redundant] == ["deleted"]
    assert all(r.state in COLD_STATES for r in rows.values())
    store.close()
