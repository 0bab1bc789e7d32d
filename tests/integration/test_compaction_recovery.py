"""Crash recovery of compaction rewrites against real Postgres and moto's HTTP S3 server.

The soak of issue 26 lost a merged file: Postgres died between a merge's Delta commit and
its manifest swap, and the row's mark_copied (committed asynchronously) died with it. The
recovery took the row's state for the truth, deleted the file the table referenced, and every
later merge of the partition failed. Here Postgres's part of each step fails on cue.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import delete, update
from sqlalchemy.engine import Engine

from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import table_key, table_uri
from coldstore.object_store import ObjectNotFoundError, ObjectStoreConfig
from compaction.target import Target
from compaction.worker import CompactionWorker
from metadata.configs import topic_config
from metadata.db_errors import PostgresUnavailable
from metadata.erasures import ErasureRepo
from metadata.schema import cold_files
from metadata.topics import TopicRepo
from metadata.types import TopicIdPartition
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.test_compaction_support import ColdEnv, now_ms, rec
from tests.integration.test_erasure_cold import ALICE
from tests.integration.test_erasure_cold import _request as erasure_request
from tests.integration.test_erasure_cold import _topic as erasure_topic


@pytest.fixture
def cold(db_engine: Engine, s3_bucket: ObjectStoreConfig) -> Iterator[ColdEnv]:
    env = ColdEnv(db_engine, s3_bucket)
    yield env
    env.store.close()


def _segments(env: ColdEnv, topic: str, count: int, n: int = 4) -> None:
    now = now_ms()
    for _ in range(count):
        base = len(env.written.get((topic, 0), []))
        env.tier(topic, 0, [rec(base + j, now - 10_000 + base + j) for j in range(n)])


def _pg_down(*a: object, **k: object) -> None:
    raise PostgresUnavailable("Postgres: connection refused (injected)")


def _assert_whole(env: ColdEnv, topic: str, records: int | list[int]) -> None:
    """Every file the table references is readable, the manifest's committed files are
    exactly the table's live files, and both read back every record once."""
    tid = env.ids[topic]
    table = DeltaTopicTable(table_uri(env.config, topic), env.config.storage_options(), topic=topic)
    root = table_key(env.config, topic)
    live = sorted(f.path for f in table.files() if f.partition == 0)
    for path in live:
        assert env.store.head(f"{root}/{path}") > 0, path
    committed = sorted(
        table.relpath(f.object_key) for f in env.manifest.files(TopicIdPartition(tid, 0))
    )
    assert committed == live
    offsets = list(range(records)) if isinstance(records, int) else records
    assert [r["offset"] for r in env.delta_rows(topic)] == offsets
    assert [r["offset"] for r in env.manifest_rows(topic)] == offsets


def _merge_later(env: ColdEnv, w: CompactionWorker, topic: str, records: int) -> None:
    """Later merges of the partition still work and keep the tier whole."""
    _segments(env, topic, 2)
    s = w.run_once()
    assert s.merged_files >= 2
    _assert_whole(env, topic, records + 8)


def test_a_merge_whose_mark_copied_died_with_postgres_is_finished(cold: ColdEnv) -> None:
    tid = cold.topic("lost-copied", **{"retention.ms": "-1"})
    _segments(cold, "lost-copied", 3)
    w = cold.worker(merge_min_files=2)
    jobs = w.jobs
    real_copied, real_swap = jobs.manifest.mark_copied, jobs.ops.swap
    # The row's copied commit is lost (the file stays copy_started), the Delta commit lands,
    # then Postgres refuses the swap.
    jobs.manifest.mark_copied = lambda fid: None  # type: ignore[method-assign]
    jobs.ops.swap = _pg_down  # type: ignore[method-assign]
    w.run_once()
    (staged,) = cold.manifest.files(TopicIdPartition(tid, 0), states=("copy_started",))
    assert "-mg" in staged.object_key
    jobs.manifest.mark_copied, jobs.ops.swap = real_copied, real_swap  # type: ignore[method-assign]

    w.run_once()  # recover: the table holds the staged file, so it is swapped in
    files = cold.manifest.files(TopicIdPartition(tid, 0))
    assert [(f.id, f.base_offset, f.last_offset) for f in files] == [(staged.id, 0, 11)]
    assert cold.store.head(staged.object_key) == staged.size_bytes
    _assert_whole(cold, "lost-copied", 12)
    _merge_later(cold, w, "lost-copied", 12)
    w.close()


def test_a_merge_killed_between_upload_and_mark_copied_is_undone(cold: ColdEnv) -> None:
    tid = cold.topic("no-copied", **{"retention.ms": "-1", "file.delete.delay.ms": "3600000"})
    _segments(cold, "no-copied", 3)
    w = cold.worker(merge_min_files=2)
    jobs = w.jobs
    real_copied, real_delete = jobs.manifest.mark_copied, jobs.manifest.start_delete
    jobs.manifest.mark_copied = _pg_down  # type: ignore[method-assign]
    jobs.manifest.start_delete = _pg_down  # type: ignore[method-assign]  # its undo fails too
    w.run_once()
    (staged,) = cold.manifest.files(TopicIdPartition(tid, 0), states=("copy_started",))
    assert cold.store.head(staged.object_key) == staged.size_bytes  # uploaded, not in Delta
    jobs.manifest.mark_copied, jobs.manifest.start_delete = real_copied, real_delete  # type: ignore[method-assign]

    w.run_once()  # recover drops the staged file (never in the table); the merge runs again
    (gone,) = [f for f in cold.manifest.files(TopicIdPartition(tid, 0), states=("deleted",))]
    assert gone.id == staged.id
    with pytest.raises(ObjectNotFoundError):
        cold.store.get(staged.object_key)
    _assert_whole(cold, "no-copied", 12)
    _merge_later(cold, w, "no-copied", 12)
    w.close()


def test_a_staged_file_the_table_held_and_dropped_waits_out_the_grace(cold: ColdEnv) -> None:
    """A staged file a Delta commit added and a later one removed may be held by a reader of
    the version between: it goes after the grace period, never at once."""
    tid = cold.topic("held-once", **{"retention.ms": "-1", "file.delete.delay.ms": "3600000"})
    _segments(cold, "held-once", 3)
    w = cold.worker(merge_min_files=2)
    jobs = w.jobs
    real_swap = jobs.ops.swap
    jobs.ops.swap = _pg_down  # type: ignore[method-assign]
    w.run_once()
    (staged,) = cold.manifest.files(TopicIdPartition(tid, 0), states=("copied",))
    jobs.ops.swap = real_swap  # type: ignore[method-assign]
    # someone removes it from the table before the recovery sees it
    info = TopicRepo(cold.engine).get("held-once")
    assert info is not None
    target = Target(tid, "held-once", 0, topic_config(info.configs))
    jobs.table(target).remove_files([staged.object_key], data_change=False)

    jobs.recover(target)
    (retired,) = cold.manifest.files(TopicIdPartition(tid, 0), states=("delete_started",))
    assert retired.id == staged.id and retired.delete_after is not None
    assert (retired.delete_after - retired.updated_at).total_seconds() >= 3599
    w.close()


def test_a_lost_retire_of_an_emptied_key_compaction_does_not_wedge_the_partition(
    cold: ColdEnv,
) -> None:
    """Key compaction empties its range (Delta remove, then retire) and the retire is lost:
    the next plan holds files the table dropped; they are retired, not rewritten."""
    tid = cold.topic(
        "emptied",
        **{"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "delete.retention.ms": "0"},
    )
    now = now_ms()
    key = {"key": b"a", "headers": None}
    cold.tier("emptied", 0, [{**key, "value": b"v", "ts": now - 9000}])
    cold.tier("emptied", 0, [{**key, "value": None, "ts": now - 8000}])
    w = cold.worker()
    jobs = w.jobs
    real_retire = jobs.ops.retire
    jobs.ops.retire = lambda ids, grace: 0  # type: ignore[method-assign]  # lost with Postgres
    w.run_once()
    assert cold.delta_rows("emptied") == []
    assert len(cold.manifest.files(TopicIdPartition(tid, 0))) == 2  # still committed
    jobs.ops.retire = real_retire  # type: ignore[method-assign]

    recs = [{"key": k, "value": b"x", "headers": None, "ts": now - 5000} for k in (b"b", b"c")]
    cold.tier("emptied", 0, recs)
    for _ in range(2):  # the dropped files retired, then the rest compacted
        w.run_once()
    _assert_whole(cold, "emptied", [2, 3])
    (f,) = cold.manifest.files(TopicIdPartition(tid, 0))
    assert "-kc" in f.object_key
    w.close()


def test_a_rewrite_whose_staging_row_was_lost_is_adopted(cold: ColdEnv) -> None:
    """The whole rewrite's Postgres tail is lost: the table holds the merged file and no row
    names it. The next merge of the range gives it a row over the old rows' range (instead
    of retiring the old rows into a hole), and merges go on."""
    tid = cold.topic("lost-stage", **{"retention.ms": "-1"})
    _segments(cold, "lost-stage", 3)
    w = cold.worker(merge_min_files=2)
    jobs = w.jobs
    real_swap = jobs.ops.swap
    merged: list[str] = []

    def lost(new_ids: list[int], *a: object, **k: object) -> None:
        with cold.engine.begin() as conn:
            gone = conn.execute(
                delete(cold_files).where(cold_files.c.id.in_(new_ids)).returning(cold_files)
            ).all()
        merged.extend(r.object_key for r in gone)
        _pg_down()

    jobs.ops.swap = lost  # type: ignore[method-assign]
    w.run_once()
    jobs.ops.swap = real_swap  # type: ignore[method-assign]
    assert len(merged) == 1 and not cold.manifest.files(
        TopicIdPartition(tid, 0), states=("copy_started", "copied")
    )
    w.run_once()
    files = cold.manifest.files(TopicIdPartition(tid, 0))
    assert [(f.object_key, f.base_offset, f.last_offset) for f in files] == [(merged[0], 0, 11)]
    assert files[0].records == 12
    _assert_whole(cold, "lost-stage", 12)
    _merge_later(cold, w, "lost-stage", 12)
    w.close()


def test_a_lost_staging_row_with_a_doomed_output_leaves_the_old_rows(cold: ColdEnv) -> None:
    """A live output whose row is in another state cannot be adopted: the old rows, the
    manifest's only view of that range, stay committed and readable."""
    tid = cold.topic("doomed", **{"retention.ms": "-1"})
    _segments(cold, "doomed", 3)
    w = cold.worker(merge_min_files=2)
    jobs = w.jobs
    real_swap = jobs.ops.swap

    def doomed(new_ids: list[int], *a: object, **k: object) -> None:
        with cold.engine.begin() as conn:
            conn.execute(
                update(cold_files).where(cold_files.c.id.in_(new_ids)).values(state="deleted")
            )
        _pg_down()

    jobs.ops.swap = doomed  # type: ignore[method-assign]
    w.run_once()
    jobs.ops.swap = real_swap  # type: ignore[method-assign]
    w.run_once()
    old = cold.manifest.files(TopicIdPartition(tid, 0))
    assert [(f.base_offset, f.last_offset) for f in old] == [(0, 3), (4, 7), (8, 11)]
    assert [r["offset"] for r in cold.manifest_rows("doomed")] == list(range(12))
    w.close()


def test_an_erasure_whose_mark_copied_died_with_postgres_is_finished(cold: ColdEnv) -> None:
    """The erasure rewrite stages, commits and swaps as a merge does, and shares `recover`."""
    tid = erasure_topic(cold, "pii-lost", files=4, alice_in=(0, 2))
    before = cold.manifest_rows("pii-lost")
    eid = erasure_request(cold, tid, "pii-lost", end=80)
    w = cold.worker()
    jobs = w.jobs
    real_copied, real_swap = jobs.manifest.mark_copied, jobs.ops.swap
    jobs.manifest.mark_copied = lambda fid: None  # type: ignore[method-assign]
    jobs.ops.swap = _pg_down  # type: ignore[method-assign]
    w.run_once()
    staged = cold.manifest.files(TopicIdPartition(tid, 0), states=("copy_started",))
    assert len(staged) == 2 and all("-er" in f.object_key for f in staged)
    jobs.manifest.mark_copied, jobs.ops.swap = real_copied, real_swap  # type: ignore[method-assign]

    w.run_once()  # recover swaps both in; the erasure then finds nothing left to erase
    e = ErasureRepo(cold.engine).get("pii-lost", eid)
    assert e is not None and e.cold["0"]["done"]
    after = [r for r in before if r["key"] != ALICE]
    assert cold.manifest_rows("pii-lost") == after
    _assert_whole(cold, "pii-lost", [r["offset"] for r in after])
    w.close()
