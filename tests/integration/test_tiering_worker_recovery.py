"""TieringWorker when things go wrong around it: a worker killed mid-upload, a lapsed worker
that committed first, a topic deleted and created again under its name. Same stand-in
replicas as test_tiering_worker.py (tests/integration/tiering_env.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

from deltalake import DeltaTable

from coldstore.layout import table_uri
from coldstore.object_store import ObjectStore
from compaction.jobs import Settings
from compaction.worker import CompactionWorker
from metadata.topics import TopicRepo
from metadata.types import TopicIdPartition
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.tiering_consistency import files_per_commit
from tests.integration.tiering_env import ROOT, Env, env_fixture, rec, tricky  # noqa: F401 (fixture)


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
    (f,) = env.manifest.files(TopicIdPartition(new, 0))
    assert ObjectStore(env.config).head(f.object_key) == f.size_bytes
    w.close()


KILLED_WORKER = """
import os, sys
from tierlog.startup import prepare
prepare()  # as a `tierlog tiering` process: not the dev install's extras
from metadata.db import make_engine
from coldstore.object_store import ObjectStore, ObjectStoreConfig
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
    (seg,) = env.registry.segments(TopicIdPartition(tid, 0))
    assert (seg.state, seg.claimed_by) == ("tiering", "doomed")
    (abandoned,) = env.manifest.files(TopicIdPartition(tid, 0), states=("copy_started",))
    assert env.manifest.files(TopicIdPartition(tid, 0)) == []  # nothing committed
    w = env.worker("rescuer")
    assert w.run_once() == 0  # the claim's lease (5 s) is still running
    deadline = time.monotonic() + 30
    while (done := w.run_once()) == 0 and time.monotonic() < deadline:
        time.sleep(0.5)  # until the lease lapses and the rescuer takes the segment over
    assert done == 1
    env.assert_exact("t")
    (committed,) = env.manifest.files(TopicIdPartition(tid, 0))
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
    """Worker A commits a batch (both partitions' segments, one Delta commit) but loses its
    leases before the manifest commit; worker B takes the batch over: Delta keeps A's files,
    B commits nothing to Delta, and the manifest must record A's files too."""
    tid = env.topic("t", 2)
    for p in (0, 1):
        env.add_segment("t", p, 0, [rec(i) for i in range(6 + p)])
    a, b = env.worker("a", lease_ms=300), env.worker("b")
    b_done = threading.Event()
    real = a.registry.mark_all_tiered

    def late_mark_all_tiered(*args: Any, **kw: Any) -> Any:
        b_done.wait(30)  # A stalls (GC pause, network) past its lease while B works
        return real(*args, **kw)

    a.registry.mark_all_tiered = late_mark_all_tiered  # type: ignore[method-assign]
    result: list[int] = []
    ta = threading.Thread(target=lambda: result.append(a.run_once()))
    ta.start()
    deadline = time.monotonic() + 30
    done = 0
    while done < 2:
        assert time.monotonic() < deadline
        done += b.run_once()
        time.sleep(0.1)
    b_done.set()
    ta.join()
    assert result == [0]  # A found its claims lost
    assert files_per_commit(env.config, "t") == [0, 2]  # the create, then A's batch only
    files = [f for p in (0, 1) for f in env.manifest.files(TopicIdPartition(tid, p))]
    dt_files = DeltaTable(
        table_uri(env.config, "t"), storage_options=env.config.storage_options()
    ).file_uris()
    assert sorted(u.split(f"{env.config.bucket}/", 1)[1] for u in dt_files) == sorted(
        f.object_key for f in files
    )
    for f in files:
        assert ObjectStore(env.config).head(f.object_key) == f.size_bytes
    env.assert_exact("t")
    a.close()
    b.close()


def test_a_corrupt_copy_is_refused_and_the_next_replica_tiers_it_at_once(env: Env) -> None:
    """A follower's copy arrives with a flipped byte (it served it, or the bytes changed on the
    way): the worker's own CRC check refuses it and the leader's copy is tiered in the same
    attempt, with no backoff on the bad copy."""
    tid = env.topic("rot", 1)
    part = TopicRepo(env.engine).partitions("rot")[0]
    follower = next(i for i in part.isr if i != part.leader)
    env.add_segment("rot", 0, 0, [rec(i) for i in range(9)])
    data, end = env.replicas[follower].segments[("rot", 0, 0)]
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 0x40
    env.replicas[follower].segments[("rot", 0, 0)] = (bytes(bad), end)
    w = env.worker("w")
    try:
        assert w.run_once() == 1
    finally:
        w.close()
    assert env.replicas[follower].requests  # tried first, refused
    assert env.replicas[part.leader or 0].requests
    env.assert_exact("rot")
    assert env.manifest.tiered_end_offset(TopicIdPartition(tid, 0)) == 9
