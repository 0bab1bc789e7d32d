"""Crash safety of the tiering worker: SIGKILL at each step between the upload and the manifest,
between two segments of one Delta commit.

The worker runs in a child process whose script monkeypatches one step to kill the process
(SIGKILL: no cleanup, no atexit, sockets cut) right after it; production code has no fault
flags. It tiers two partitions' segments in batches of two (p0 s0 + p1 s0, then p0 s1 +
p1 s1), one Delta commit each. A new worker then takes over once the dead worker's claim
lease lapses, and the table, the manifest and the bucket must agree, with every offset in the
table exactly once: the batch the worker died in is visible either whole or not at all.

    after_upload        the batch's first data file is in S3 (copy_started), the second not
                        uploaded yet; nothing of the batch in Delta
    after_delta_commit  both files in Delta in one commit, their manifest rows still copied
    in_manifest_tx      killed inside mark_all_tiered's transaction, after the second file's
                        upsert: Postgres rolls the whole transaction back (as above)
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
from tests.integration.tiering_consistency import all_rows, assert_consistent, files_per_commit
from tests.integration.tiering_env import ROOT, Env, rec, tricky

LEASE_MS = 1000

CRASHING_WORKER = """
import os, signal, sys
from tierlog.startup import prepare
prepare()  # as a `tierlog tiering` process: not the dev install's extras
from sqlalchemy import event
from metadata.db import make_engine
from coldstore.delta_table import DeltaTopicTable
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from tiering.batch import BatchSettings
from tiering.worker import TieringWorker

url, bucket, prefix, endpoint, point, nth, lease_ms = sys.argv[1:8]
calls = [0]

def maybe_die():
    calls[0] += 1
    if calls[0] == int(nth):  # the batches before this one are tiered normally
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
    real_commit = DeltaTopicTable.commit_files
    def commit_files(self, *args, **kw):
        result = real_commit(self, *args, **kw)
        maybe_die()
        return result
    DeltaTopicTable.commit_files = commit_files
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
# Batches of one segment per partition (2); one upload thread, so the first upload of a
# batch finishes before the second starts.
batch = BatchSettings(max_segments=2, upload_threads=1)
TieringWorker(engine, config, "doomed", lease_ms=int(lease_ms), batch=batch).run_once()
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


# Which call of the patched step kills the worker in batch 1 or 2: the first upload of the
# batch, its commit, the second segment's upsert in its manifest transaction.
NTH = {"after_upload": (1, 3), "after_delta_commit": (1, 2), "in_manifest_tx": (2, 4)}


@pytest.mark.parametrize("batch", [1, 2], ids=["first-batch", "second-batch"])
@pytest.mark.parametrize("point", ["after_upload", "after_delta_commit", "in_manifest_tx"])
def test_a_worker_killed_between_two_segments_of_a_commit_is_recovered(
    env: Env, fresh_db: str, point: str, batch: int
) -> None:
    tid = env.topic("t", 2)
    # Two segments per partition: batch 1 is both partitions' first, batch 2 their second.
    # The doomed worker dies in batch 1 (the table does not exist yet) or in batch 2 (the
    # partitions' Delta txns already hold batch 1's commit) after tiering batch 1.
    ends = {
        p: env.add_segment("t", p, 0, tricky() if p == 0 else [rec(i) for i in range(5)])
        for p in (0, 1)
    }
    for p in (0, 1):
        env.add_segment("t", p, ends[p], [rec(i) for i in range(ends[p], ends[p] + 7)])
    _run_crashing_worker(env, fresh_db, point, NTH[point][batch - 1])

    # -- just after the crash: the batch is abandoned mid-way, wholly invisible --------------
    segs = [s for p in (0, 1) for s in env.registry.segments(TopicIdPartition(tid, p))]
    crashed = [s for s in segs if s.state == "tiering" and s.claimed_by == "doomed"]
    first = 0 if batch == 1 else None
    assert sorted((s.partition, s.base_offset) for s in crashed) == [
        (0, ends[0] if first is None else 0),
        (1, ends[1] if first is None else 0),
    ]
    assert len([s for s in segs if s.state == "tiered"]) == 2 * (batch - 1)
    rows = all_rows(env.engine, tid, 2)
    attempts = {
        (s.partition, s.base_offset): [
            r for r in rows if (r.partition, r.base_offset) == (s.partition, s.base_offset)
        ]
        for s in crashed
    }
    table = DeltaTopicTable(table_uri(env.config, "t"), env.config.storage_options(), topic="t")
    root = table_key(env.config, "t")
    # (killed before its first commit, the worker may not even have created the table)
    in_delta = {f"{root}/{f.path}" for f in table.files()} if table.exists() else set()
    store = ObjectStore(env.config)
    abandoned = {}
    if point == "after_upload":  # the first segment's file uploaded, the second's not yet
        (p0,) = attempts[crashed[0].partition, crashed[0].base_offset]
        assert p0.state == "copy_started"
        assert store.head(p0.object_key) == p0.size_bytes
        assert all(r.state == "copy_started" for r in attempts[1, crashed[1].base_offset])
        assert not any(r.object_key in in_delta for a in attempts.values() for r in a)
    else:  # both uploaded and in Delta by one commit; the manifest shows neither
        for key, (r,) in attempts.items():
            assert r.state == "copied"
            assert r.object_key in in_delta
            assert store.head(r.object_key) == r.size_bytes
            abandoned[key] = r
        assert files_per_commit(env.config, "t")[-1] == 2
    for s in crashed:  # readers (committed rows only) see neither
        assert all(f.base_offset != s.base_offset for f in env.manifest.files(s.tp))
        assert env.manifest.tiered_end_offset(s.tp) in (None, s.base_offset)

    # -- restart: a new worker takes the batch over once the dead one's lease lapses ---------
    rescuer = env.worker("rescuer", lease_ms=10_000)
    deadline = time.monotonic() + 60
    while not all(
        s.state == "tiered" for p in (0, 1) for s in env.registry.segments(TopicIdPartition(tid, p))
    ):
        assert time.monotonic() < deadline, "the crashed batch was never taken over"
        if rescuer.run_once() == 0:
            time.sleep(0.2)
    rescuer.close()

    assert_consistent(env.engine, env.config, "t", tid, 2)
    env.assert_exact("t")  # every offset exactly once: no segment of the batch twice
    assert max(files_per_commit(env.config, "t")) >= 2  # the workers did commit batches
    rows_by_key = {r.object_key: r for r in all_rows(env.engine, tid, 2)}
    for s in crashed:
        (final,) = [r for r in env.manifest.files(s.tp) if r.base_offset == s.base_offset]
        mine = attempts[s.partition, s.base_offset]
        if point == "after_upload":
            # Never in Delta: the rescuer's own uploads are committed, the abandoned deleted.
            assert all(final.object_key != r.object_key for r in mine)
            assert all(rows_by_key[r.object_key].state == "deleted" for r in mine)
        else:
            # Delta kept the dead worker's files: the manifest records those, and the
            # rescuer's redundant uploads (never in Delta) are deleted.
            old = abandoned[s.partition, s.base_offset]
            assert final.object_key == old.object_key
            redundant = [
                r
                for r in rows_by_key.values()
                if (r.partition, r.base_offset) == (s.partition, s.base_offset)
                and r.object_key != old.object_key
            ]
            assert [r.state for r in redundant] == ["deleted"]
    assert all(r.state in COLD_STATES for r in rows_by_key.values())
    store.close()
