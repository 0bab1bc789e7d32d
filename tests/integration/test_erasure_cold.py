"""The cold tier's share of an erasure (compaction/erasure_job.py) against real Postgres and
moto's HTTP S3 server: only files holding the key are rewritten, in one Delta commit; every
other record keeps its offset; after the grace period no object in the bucket holds the key;
a worker that dies between the Delta commit and the manifest swap finishes on its next pass."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from prometheus_client import REGISTRY
from sqlalchemy.engine import Engine

from cluster.wakeups import Wakeups
from coldstore.object_store import ObjectStoreConfig
from compaction.manifest_ops import CompactionManifest
from metadata.erasures import ErasureRepo, replica_name
from metadata.types import TopicIdPartition
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.test_compaction_support import ColdEnv, now_ms, rec

ALICE = b"alice"


@pytest.fixture
def cold(db_engine: Engine, s3_bucket: ObjectStoreConfig) -> Iterator[ColdEnv]:
    env = ColdEnv(db_engine, s3_bucket)
    yield env
    env.store.close()


def _topic(
    cold: ColdEnv,
    name: str,
    files: int = 6,
    alice_in: tuple[int, ...] = (1, 4),
    grace: int = 0,
    all_alice: tuple[int, ...] = (),
) -> str:
    tid = cold.topic(name, **{"file.delete.delay.ms": str(grace)})
    now = now_ms()
    for f in range(files):
        base = 20 * f
        recs = [rec(base + i, now + base + i) for i in range(20)]
        if f in all_alice:
            recs = [rec(base + i, now + base + i, key=ALICE) for i in range(20)]
        elif f in alice_in:
            recs[3] = rec(base + 3, now + base + 3, key=ALICE, value=b"secret")
            recs[17] = rec(base + 17, now + base + 17, key=ALICE, value=b"secret2")
        cold.tier(name, 0, recs)
    return tid


def _request(cold: ColdEnv, tid: str, name: str, end: int) -> str:
    repo = ErasureRepo(cold.engine)
    e = repo.create(tid, name, [ALICE], "User:test", {0: end})
    for r in repo.replicas(TopicIdPartition(tid, 0)):  # the hot tier is done
        repo.record_hot(e.id, replica_name(0, r), {"done": True})
    return e.id


def _sample(name: str) -> float:
    return REGISTRY.get_sample_value(name, {"topic": "pii"}) or 0.0


def _bucket_keys(cold: ColdEnv, name: str) -> list[bytes | None]:
    """Every key in every Parquet object under the table, read from the bucket directly."""
    keys: list[bytes | None] = []
    for key, _ in cold.store.list(f"{cold.config.key('topics', name)}/"):
        if key.endswith(".parquet"):
            table = pq.read_table(pa.BufferReader(cold.store.get(key)), columns=["key"])
            keys.extend(table.column("key").to_pylist())
    return keys


def test_only_files_with_the_key_are_rewritten_and_objects_go_after_grace(cold: ColdEnv) -> None:
    tid = _topic(cold, "pii", grace=1000)
    tp = TopicIdPartition(tid, 0)
    before = cold.manifest_rows("pii")
    files_before = cold.manifest.files(tp)
    eid = _request(cold, tid, "pii", end=120)
    cold_metrics = ("records_removed", "files_rewritten", "bytes_rewritten")
    counted = {m: _sample(f"tierlog_erasure_cold_{m}_total") for m in cold_metrics}
    w = cold.worker()
    w.run_once()
    e = ErasureRepo(cold.engine).get("pii", eid)
    assert e is not None
    result = e.cold["0"]
    assert result["done"] and result["files_rewritten"] == 2 and result["records_removed"] == 4
    for m in cold_metrics:
        assert _sample(f"tierlog_erasure_cold_{m}_total") - counted[m] == result[m], m
    assert result["files_read"] == 2  # the bloom filters ruled the other four out unread
    assert result["bytes_rewritten"] == files_before[1].size_bytes + files_before[4].size_bytes
    want = [r for r in before if r["key"] != ALICE]
    assert cold.manifest_rows("pii") == want  # every other record at its offset
    assert [r["offset"] for r in cold.delta_rows("pii")] == [r["offset"] for r in want]
    files = cold.manifest.files(tp)
    assert [(f.base_offset, f.last_offset) for f in files] == [
        (f.base_offset, f.last_offset) for f in files_before
    ]  # the manifest still tiles the partition
    untouched = {f.object_key for f in files_before} - {
        files_before[1].object_key,
        files_before[4].object_key,
    }
    assert untouched <= {f.object_key for f in files}
    adds = [a for a in cold.delta_log_actions("pii") if "add" in a]
    assert len({a["add"]["path"] for a in adds}) == 8  # six tiered + two rewritten, one commit
    assert ALICE in _bucket_keys(cold, "pii")  # in the grace period readers may still need them
    deadline = time.monotonic() + 30
    while ALICE in _bucket_keys(cold, "pii"):  # the sweep, once the grace period is over
        assert time.monotonic() < deadline, "replaced objects outlived the grace period"
        w.run_once()
    assert w.run_once().partitions == 1  # and a later pass changes nothing
    w.close()


def test_a_worker_killed_between_delta_commit_and_swap_finishes_it(
    cold: ColdEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    tid = _topic(cold, "pii2", files=4, alice_in=(0, 2), all_alice=(3,))  # file 3: only alice
    before = cold.manifest_rows("pii2")
    eid = _request(cold, tid, "pii2", end=80)
    w = cold.worker()

    def dies(*_: object, **__: object) -> None:
        raise SystemExit("killed")  # as kill -9 after the Delta commit

    monkeypatch.setattr(CompactionManifest, "swap", dies)
    with pytest.raises(SystemExit):
        w.run_once()
    monkeypatch.undo()
    w.close()
    w = cold.worker()  # a new worker process: recover, then the erasure again
    w.run_once()
    e = ErasureRepo(cold.engine).get("pii2", eid)
    assert e is not None and e.cold["0"]["done"]
    assert cold.manifest_rows("pii2") == [r for r in before if r["key"] != ALICE]
    assert [f.base_offset for f in cold.manifest.files(TopicIdPartition(tid, 0))] == [0, 20, 40]
    assert ALICE not in [r["key"] for r in cold.delta_rows("pii2")]
    assert ALICE not in _bucket_keys(cold, "pii2")  # zero grace: swept in the same pass
    w.close()


def test_an_idle_worker_passes_as_soon_as_the_last_replica_is_done(
    cold: ColdEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's timer here never fires within the test (10 minutes): once it is idle
    (listening, caught up, nothing notified), the cold pass can only come from the NOTIFY
    the hot tier's last record sends (ERASURE_WORK_CHANNEL)."""
    tid = _topic(cold, "pii3", files=2, alice_in=(1,))
    repo = ErasureRepo(cold.engine)
    e = repo.create(tid, "pii3", [ALICE], "User:test", {0: 40})
    idle = threading.Event()

    class ObservedWakeups(Wakeups):
        def wait(self, timeout_s: float, stop: threading.Event, *, notified: bool = True) -> None:
            if notified and self._listener.connected.is_set() and not self._event.is_set():
                idle.set()  # the catch-up ran before `connected`: no pass is owed
            super().wait(timeout_s, stop, notified=notified)

    monkeypatch.setattr("compaction.worker.Wakeups", ObservedWakeups)
    w = cold.worker()
    stop = threading.Event()
    loop = threading.Thread(target=w.run_forever, args=(600_000, stop), daemon=True)
    loop.start()
    try:
        assert idle.wait(30), "the worker never went idle"
        got = repo.get("pii3", e.id)
        assert got is not None
        assert not got.cold, got.cold  # its passes so far: the hot tier was not done
        for r in repo.replicas(TopicIdPartition(tid, 0)):
            repo.record_hot(e.id, replica_name(0, r), {"done": True})
        deadline = time.monotonic() + 30
        while not ((now := repo.get("pii3", e.id)) and now.cold.get("0", {}).get("done")):
            assert time.monotonic() < deadline, "no cold pass after the hot tier was done"
            time.sleep(0.05)
    finally:
        stop.set()
        loop.join(10)
        w.close()
    assert not loop.is_alive()
