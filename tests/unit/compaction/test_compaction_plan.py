"""compaction/plan.py: retention, merge bins and key-compaction triggers (pure decisions)."""

from __future__ import annotations

import datetime as dt

from compaction.plan import (
    LOG_START,
    plan_key_compaction,
    plan_merges,
    plan_retention,
    plan_start_breach,
)
from metadata.types import ColdFile

NOW = 1_800_000_000_000
T = dt.datetime.fromtimestamp(NOW / 1000, dt.UTC)


def f(
    base: int, last: int, size: int, max_ts: int, *, min_ts: int | None = None, key: str = ""
) -> ColdFile:
    return ColdFile(
        base, "t", 0, base, last, max_ts if min_ts is None else min_ts, max_ts,
        key or f"x/{base:020d}-abc.parquet", size, last - base + 1, "committed", 1, T, T, None,
    )  # fmt: skip


def test_retention_by_time_is_a_prefix() -> None:
    files = [f(0, 9, 10, NOW - 5000), f(10, 19, 10, NOW - 100), f(20, 29, 10, NOW - 5000)]
    got = plan_retention(files, 0, 1000, -1, NOW)
    assert [(e.file.base_offset, e.reason) for e in got] == [(0, "time")]
    assert plan_retention(files, 0, -1, -1, NOW) == []
    # strictly older than now - retention.ms
    assert plan_retention([f(0, 9, 10, NOW - 1000)], 0, 1000, -1, NOW) == []


def test_files_wholly_below_a_deleterecords_start_go_and_the_one_holding_it_stays() -> None:
    files = [f(0, 9, 10, NOW), f(10, 19, 10, NOW), f(20, 29, 10, NOW)]
    got = plan_start_breach(files, 15)
    assert [(e.file.base_offset, e.reason) for e in got] == [(0, LOG_START)]
    assert [e.file.base_offset for e in plan_start_breach(files, 20)] == [0, 10]
    assert [e.file.base_offset for e in plan_start_breach(files, 30)] == [0, 10, 20]
    assert plan_start_breach(files, 9) == []  # offset 9 is still readable
    assert plan_start_breach(files, None) == []


def test_retention_by_size_keeps_at_least_the_bound() -> None:
    files = [f(0, 9, 100, NOW), f(10, 19, 100, NOW), f(20, 29, 100, NOW)]
    assert [e.file.base_offset for e in plan_retention(files, 0, -1, 200, NOW)] == [0]
    assert [e.file.base_offset for e in plan_retention(files, 0, -1, 199, NOW)] == [0]
    assert [e.file.base_offset for e in plan_retention(files, 0, -1, 100, NOW)] == [0, 10]
    assert plan_retention(files, 0, -1, 201, NOW) == []
    # hot bytes not tiered yet count towards the partition's size
    assert [e.file.base_offset for e in plan_retention(files, 150, -1, 200, NOW)] == [0, 10]


def test_merge_bins_adjacent_small_files() -> None:
    files = [f(i * 10, i * 10 + 9, 30, NOW) for i in range(7)]
    groups = plan_merges(files, 100, min_files=4)
    assert [[x.base_offset for x in g] for g in groups] == [[0, 10, 20], [30, 40, 50]]
    # a lone leftover is not rewritten; a big file breaks a run
    files = [f(0, 9, 30, NOW), f(10, 19, 500, NOW), f(20, 29, 30, NOW), f(30, 39, 30, NOW)]
    assert [[x.base_offset for x in g] for g in plan_merges(files, 100, 4)] == [[20, 30]]
    # a gap breaks a run too
    files = [f(0, 9, 30, NOW), f(20, 29, 30, NOW)]
    assert plan_merges(files, 100, 2) == []
    # a trickle under half the target waits for min_files
    files = [f(0, 9, 10, NOW), f(10, 19, 10, NOW)]
    assert plan_merges(files, 100, 4) == [] and len(plan_merges(files, 100, 2)) == 1


def test_key_compaction_triggers() -> None:
    kw = dict(
        min_compaction_lag_ms=1000,
        max_compaction_lag_ms=10**12,
        min_cleanable_dirty_ratio=0.5,
        delete_retention_ms=10_000,
    )
    young = f(20, 29, 100, NOW - 10)
    dirty = f(0, 9, 100, NOW - 5000)
    done = f(10, 19, 300, NOW - 5000, key="x/0-kcabc.parquet")
    plan = plan_key_compaction([dirty, young], NOW, **kw)  # type: ignore[arg-type]
    assert plan.files == [dirty] and plan.lag_ms == 5000
    # below the dirty ratio: wait
    plan = plan_key_compaction([done, dirty, young], NOW, **kw)  # type: ignore[arg-type]
    assert plan.files == [] and plan.dirty_bytes == 100 and plan.cleanable_bytes == 400
    # …unless max.compaction.lag.ms is exceeded
    plan = plan_key_compaction([done, dirty], NOW, **{**kw, "max_compaction_lag_ms": 1000})  # type: ignore[arg-type]
    assert plan.files == [done, dirty]
    # nothing dirty and no tombstone to expire: nothing to do
    assert plan_key_compaction([done], NOW, **kw).files == []  # type: ignore[arg-type]
