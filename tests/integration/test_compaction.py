"""Cold retention and small-file merge against real Postgres and moto's HTTP S3 server."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy.engine import Engine

from coldstore.layout import table_key
from coldstore.object_store import ObjectNotFoundError, ObjectStoreConfig
from compaction.manifest_ops import CompactionManifest
from logformat.errors import ErrorCode, TierlogError
from metadata.topics import TopicRepo
from metadata.types import TopicIdPartition
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.test_compaction_support import ColdEnv, now_ms, rec


@pytest.fixture
def cold(db_engine: Engine, s3_bucket: ObjectStoreConfig) -> Iterator[ColdEnv]:
    env = ColdEnv(db_engine, s3_bucket)
    yield env
    env.store.close()


def _segments(env: ColdEnv, topic: str, stamps: list[int], n: int = 10, p: int = 0) -> None:
    for ts in stamps:
        base = len(env.written.get((topic, p), []))
        env.tier(topic, p, [rec(base + i, ts + i) for i in range(n)])


def test_retention_ms_removes_exactly_the_expired_files_after_a_grace(cold: ColdEnv) -> None:
    now = now_ms()
    hour = 3_600_000
    tid = cold.topic("events", **{"retention.ms": str(hour), "file.delete.delay.ms": "1500"})
    # four files of 10 records; the first two are older than an hour
    _segments(cold, "events", [now - 3 * hour, now - 2 * hour, now - 30 * 60_000, now - 60_000])
    reader_view = cold.manifest.files(
        TopicIdPartition(tid, 0)
    )  # a reader resolved offsets before retention
    w = cold.worker()
    s = w.run_once()
    assert s.expired_files == 2 and s.deleted_objects == 0
    assert [
        (f.base_offset, f.last_offset) for f in cold.manifest.files(TopicIdPartition(tid, 0))
    ] == [
        (20, 29),
        (30, 39),
    ]
    assert cold.manifest.log_start_offset(TopicIdPartition(tid, 0)) == 20
    assert cold.manifest.cold_range(TopicIdPartition(tid, 0)) == (20, 40)
    assert [r["offset"] for r in cold.delta_rows("events")] == list(range(20, 40))
    removes = [a["remove"] for a in cold.delta_log_actions("events") if "remove" in a]
    assert len(removes) == 2 and all(r["dataChange"] for r in removes)
    # during the grace period the reader's old view still reads every file it holds
    for f in reader_view:
        rows = pq.read_table(pa.BufferReader(cold.store.get(f.object_key))).column("offset")
        assert rows.to_pylist() == list(range(f.base_offset, f.last_offset + 1))
    retired = cold.manifest.files(TopicIdPartition(tid, 0), states=("delete_started",))
    assert [f.base_offset for f in retired] == [0, 10]
    time.sleep(1.6)
    s = w.run_once()
    assert s.deleted_objects == 2 and s.expired_files == 0
    assert [
        f.state for f in cold.manifest.files(TopicIdPartition(tid, 0), states=("deleted",))
    ] == ["deleted"] * 2
    for f in retired:
        with pytest.raises(ObjectNotFoundError):
            cold.store.get(f.object_key)
    # the log start stays where retention put it, and nothing else changes on later passes
    assert w.run_once().expired_files == 0
    assert cold.manifest.log_start_offset(TopicIdPartition(tid, 0)) == 20
    w.close()


def test_retention_bytes_keeps_at_least_the_bound_counting_untiered_bytes(cold: ColdEnv) -> None:
    now = now_ms()
    tid = cold.topic("sized", **{"retention.ms": "-1"})
    _segments(cold, "sized", [now - 5000 + i for i in range(5)])
    files = cold.manifest.files(TopicIdPartition(tid, 0))
    sizes = [f.size_bytes for f in files]
    # keep the newest two files exactly: Kafka deletes a file only if what stays >= the bound
    bound = sizes[-1] + sizes[-2]
    cold.topic("other")  # another topic is untouched
    from metadata.topics import TopicRepo

    TopicRepo(cold.engine).alter_configs("sized", {"retention.bytes": str(bound)}, [])
    w = cold.worker()
    assert w.run_once().expired_files == 3
    assert [f.base_offset for f in cold.manifest.files(TopicIdPartition(tid, 0))] == [30, 40]
    # untiered hot bytes count too: a sealed segment not tiered yet pushes the oldest file out
    # (as big as the older kept file, so that what stays after it goes is still >= the bound:
    # the files' sizes differ by a few bytes from run to run, with the timestamps in them)
    cold.registry.register_sealed(TopicIdPartition(tid, 0), 50, 60, sizes[-2])
    assert w.run_once().expired_files == 1
    assert [f.base_offset for f in cold.manifest.files(TopicIdPartition(tid, 0))] == [40]
    assert cold.manifest.log_start_offset(TopicIdPartition(tid, 0)) == 40
    w.close()


def test_compact_only_topics_are_not_expired_by_time(cold: ColdEnv) -> None:
    now = now_ms()
    tid = cold.topic("table", **{"cleanup.policy": "compact", "retention.ms": "1000"})
    _segments(cold, "table", [now - 10 * 3_600_000])
    cold.worker().run_once()
    assert cold.manifest.log_start_offset(TopicIdPartition(tid, 0)) == 0


def test_all_expired_leaves_the_log_start_at_the_end(cold: ColdEnv) -> None:
    now = now_ms()
    tid = cold.topic("gone", **{"retention.ms": "1000"})
    _segments(cold, "gone", [now - 100_000, now - 50_000])
    cold.worker().run_once()
    assert cold.manifest.files(TopicIdPartition(tid, 0)) == []
    assert cold.manifest.log_start_offset(TopicIdPartition(tid, 0)) == 20
    assert cold.delta_rows("gone") == []


def test_merge_under_a_concurrent_reader_sees_every_offset_exactly_once(cold: ColdEnv) -> None:
    now = now_ms()
    tid = cold.topic("small", 2, **{"retention.ms": "-1", "file.delete.delay.ms": "600000"})
    for p in (0, 1):
        _segments(cold, "small", [now - 1000 * (12 - i) for i in range(12)], n=5, p=p)
    before = cold.manifest.files(TopicIdPartition(tid, 0))
    sizes = [f.size_bytes for f in before]
    target = sum(sizes[:4])  # about four small files per merged file
    stop = threading.Event()
    seen: list[int] = []
    errors: list[str] = []

    def reader() -> None:
        # resolve offsets through the manifest (one snapshot), then read the objects
        while not stop.is_set():
            files = cold.manifest.files(TopicIdPartition(tid, 0))
            offsets = []
            for f in files:
                table = pq.read_table(pa.BufferReader(cold.store.get(f.object_key)))
                offsets.extend(table.column("offset").to_pylist())
            if sorted(offsets) != list(range(60)) or len(offsets) != 60:
                errors.append(f"{len(files)} files gave {len(offsets)} offsets")
            seen.append(len(files))

    t = threading.Thread(target=reader)
    t.start()
    try:
        time.sleep(0.3)
        w = cold.worker(target_file_bytes=target, merge_min_files=2)
        s = w.run_once()
        time.sleep(0.3)
    finally:
        stop.set()
        t.join()
    assert not errors, errors[:3]
    assert s.merged_files >= 8
    after = cold.manifest.files(TopicIdPartition(tid, 0))
    assert len(after) < len(before) and len(after) <= 4
    assert max(seen) == 12 and min(seen) == len(after)  # the reader saw both layouts
    # contiguous ranges, every offset once, in Delta and through the manifest
    assert after[0].base_offset == 0 and after[-1].last_offset == 59
    assert all(a.last_offset + 1 == b.base_offset for a, b in itertools.pairwise(after))
    for p in (0, 1):
        rows = cold.delta_rows("small", p)
        assert [r["offset"] for r in rows] == list(range(60))
        assert [(r["key"], r["value"]) for r in rows] == [
            (x["key"], x["value"]) for x in cold.written[("small", p)]
        ]
        assert [r["offset"] for r in cold.manifest_rows("small", p)] == list(range(60))
    actions = cold.delta_log_actions("small")
    merged = [a for a in actions if "remove" in a or ("add" in a and "-mg" in a["add"]["path"])]
    assert merged and all(not next(iter(a.values()))["dataChange"] for a in merged)
    # the old files stay readable during the grace period
    assert all(cold.store.head(f.object_key) == f.size_bytes for f in before)
    w.close()


def test_a_rewrite_that_crashed_after_its_delta_commit_is_finished(cold: ColdEnv) -> None:
    now = now_ms()
    tid = cold.topic("crash", **{"retention.ms": "-1"})
    _segments(cold, "crash", [now - 3000, now - 2000, now - 1000], n=4)
    w = cold.worker(target_file_bytes=1 << 20, merge_min_files=2)
    swaps: list[int] = []

    def boom(*a: object, **k: object) -> None:
        swaps.append(1)
        raise RuntimeError("crash before the manifest swap")

    real = CompactionManifest.swap
    w.jobs.ops.swap = boom  # type: ignore[method-assign]
    w.run_once()
    assert swaps
    # Delta already holds the merged file; the manifest still lists the three old ones
    assert len(cold.manifest.files(TopicIdPartition(tid, 0))) == 3
    assert [r["offset"] for r in cold.delta_rows("crash")] == list(range(12))
    w.jobs.ops.swap = real.__get__(w.jobs.ops)  # type: ignore[method-assign]
    w.run_once()  # recovery swaps the staged file in
    files = cold.manifest.files(TopicIdPartition(tid, 0))
    assert len(files) == 1 and (files[0].base_offset, files[0].last_offset) == (0, 11)
    assert [r["offset"] for r in cold.manifest_rows("crash")] == list(range(12))
    assert [r["offset"] for r in cold.delta_rows("crash")] == list(range(12))
    w.close()


def test_the_tierlog_compaction_role_runs_the_worker(
    cold: ColdEnv, fresh_db: str, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys

    import httpx

    from tests.integration.cluster import wait_for
    from tests.integration.ports import free_port

    now = now_ms()
    tid = cold.topic("cli", **{"retention.ms": "60000", "file.delete.delay.ms": "0"})
    _segments(cold, "cli", [now - 600_000, now - 1000])
    port = free_port()
    env = {
        **os.environ,
        "TIERLOG_DATABASE_URL": fresh_db,
        "TIERLOG_S3_ENDPOINT": cold.config.endpoint_url or "",
        "TIERLOG_S3_BUCKET": cold.config.bucket,
        "TIERLOG_S3_PREFIX": cold.config.prefix,
        "AWS_ACCESS_KEY_ID": cold.config.access_key_id or "x",
        "AWS_SECRET_ACCESS_KEY": cold.config.secret_access_key or "x",
    }
    log = (tmp_path / "compaction.log").open("wb")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "tierlog", "compaction", "--poll-ms", "200"),
            *("--min-grace-ms", "0", "--listen", f"127.0.0.1:{port}"),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(
            "expired and swept",
            lambda: cold.manifest.log_start_offset(TopicIdPartition(tid, 0)) == 10,
        )
        wait_for(
            "object deleted",
            lambda: len(cold.manifest.files(TopicIdPartition(tid, 0), states=("deleted",))) == 1,
        )
        text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert 'tierlog_compaction_expired_files_total{reason="time",topic="cli"} 1.0' in text
        assert "tierlog_compaction_reclaimed_bytes_total" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        log.close()
    assert "retention removed cold files" in (tmp_path / "compaction.log").read_text()


def test_a_deleted_topics_table_leaves_the_bucket_then_the_name_is_free(cold: ColdEnv) -> None:
    now = now_ms()
    cold.topic("gone")
    _segments(cold, "gone", [now - 1000, now])
    root = table_key(cold.config, "gone") + "/"
    assert any("/_delta_log/" in key for key, _ in cold.store.list(root))
    repo = TopicRepo(cold.engine)
    repo.delete("gone")
    # Until its table is gone, a new "gone" would write into the old topic's Delta table.
    with pytest.raises(TierlogError) as refused:
        repo.create("gone", 1, 2)
    assert refused.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
    assert "marked for deletion" in str(refused.value)
    assert cold.worker(min_grace_ms=3_600_000).run_once().purged_topics == 0  # in its grace
    assert list(cold.store.list(root))
    summary = cold.worker().run_once()
    assert summary.purged_topics == 1 and summary.deleted_objects >= 4  # 2 files + 3 commits
    assert list(cold.store.list(root)) == []
    # The name is free again, and the new topic's table holds only its own records.
    cold.topic("gone")
    del cold.written[("gone", 0)]
    _segments(cold, "gone", [now], n=5)
    assert [r["offset"] for r in cold.delta_rows("gone")] == list(range(5))
    assert cold.worker().run_once().purged_topics == 0


def test_a_topic_with_nothing_tiered_is_deleted_at_once(cold: ColdEnv) -> None:
    repo = TopicRepo(cold.engine)
    tid = cold.topic("plain")
    # A sealed segment no tiering worker ever claimed (a cluster without tiering workers).
    cold.registry.register_sealed(TopicIdPartition(tid, 0), 0, 10, 1000)
    repo.delete("plain")
    cold.topic("plain")  # nothing of it can be in the bucket: no wait for the compaction role
