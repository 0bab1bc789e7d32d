"""Planning without S3: files the bounds cover entirely are never opened while planning."""

from __future__ import annotations

from spark_tables.bounds import Bounds
from spark_tables.cold_files import ColdFileInfo, cold_end
from spark_tables.options import parse_options
from spark_tables.parquet_read import RowGroupStats
from spark_tables.planner import ColdGroup, ColdSlice, HotRange, plan_pieces, row_group_runs
from spark_tables.scan import resolve
from spark_tables.stream import cap

OPTS = parse_options({"topic": "t", "endpoint": "http://127.0.0.1:1", "bucket": "b"}, {})


def f(p: int, lo: int, hi: int, size: int = 1000) -> ColdFileInfo:
    return ColdFileInfo(f"k/{p}/{lo}", p, size, lo, hi, 1000 + lo, 1000 + hi, hi - lo + 1)


FILES = {0: [f(0, 0, 99), f(0, 100, 199)], 1: [f(1, 0, 49, size=5000)]}


def test_whole_files_need_no_footer() -> None:
    plan = plan_pieces(OPTS, FILES, {0: (0, None), 1: (0, None)}, {}, Bounds())
    slices = [p for p in plan.pieces if isinstance(p, ColdSlice)]
    assert [(s.file.key, s.row_groups, s.byte_range) for s in slices] == [
        ("k/0/0", None, None),
        ("k/0/100", None, None),
        ("k/1/0", None, None),
    ]
    assert plan.footers_read == 0 and (plan.files_listed, plan.bytes_listed) == (3, 7000)
    assert sum(s.planned_bytes for s in slices) == 7000


def test_splits_are_runs_of_row_groups_sized_by_their_statistics() -> None:
    sizes = [900, 900, 900, 3000, 100, 100, 100]
    stats = [RowGroupStats(0, s, None, None, None, None) for s in sizes]
    runs = row_group_runs(stats, range(len(sizes)), 2000)
    assert runs == [((0, 1), 1800), ((2,), 900), ((3,), 3000), ((4, 5, 6), 300)]
    # row groups the bounds left out break a run: each run is one contiguous read
    assert row_group_runs(stats, [0, 2, 4, 5], 2000) == [((0,), 900), ((2,), 900), ((4, 5), 200)]


def test_ranges_partitions_and_time_bounds_drop_whole_files() -> None:
    plan = plan_pieces(OPTS, FILES, {0: (100, None)}, {}, Bounds())
    assert plan.files_planned() == ["k/0/100"]
    plan = plan_pieces(OPTS, FILES, {0: (0, None), 1: (0, None)}, {}, Bounds(ts_lo=1100))
    assert plan.files_planned() == ["k/0/100"]  # by the files' max timestamps
    assert plan.footers_read == 0  # the bounds cover the file: nothing to cut
    assert plan_pieces(OPTS, FILES, {0: (0, None)}, {}, Bounds(impossible=True)).pieces == []


def test_the_hot_tier_takes_over_at_its_start_in_chunks() -> None:
    opts = OPTS.with_(hot_chunk_records=40)
    plan = plan_pieces(opts, FILES, {0: (0, 300), 1: (0, 60)}, {0: 200, 1: 50}, Bounds(ts_hi=9999))
    cold = [(s.file.key, s.bounds.offset_lo, s.bounds.offset_hi) for s in plan.cold]
    assert cold == [("k/0/0", 0, 200), ("k/0/100", 0, 200), ("k/1/0", 0, 50)]
    hot = [(h.partition, h.start, h.end) for h in plan.pieces if isinstance(h, HotRange)]
    assert hot == [(0, 200, 240), (0, 240, 280), (0, 280, 300), (1, 50, 60)]
    assert all(h.bounds.ts_hi == 9999 for h in plan.hot)
    # pieces come in (partition, offset) order: cold before hot within a partition
    assert [type(p).__name__ for p in plan.pieces] == ["ColdSlice"] * 2 + ["HotRange"] * 3 + [
        "ColdSlice",
        "HotRange",
    ]


def _keys(task: object) -> list[str]:
    if isinstance(task, ColdGroup):
        return [s.file.key for s in task.slices]
    assert isinstance(task, ColdSlice)
    return [task.file.key]


def test_small_files_are_packed_in_order_into_min_partitions_tasks() -> None:
    files = {p: [f(p, lo, lo + 99) for lo in range(0, 600, 100)] for p in (0, 1)}
    plan = plan_pieces(OPTS, files, {0: (0, None), 1: (0, None)}, {}, Bounds())
    every = [s.file.key for s in plan.cold]
    assert len(every) == 12
    tasks = plan.tasks(2, 128 << 20)
    assert [len(_keys(t)) for t in tasks] == [6, 6]  # balanced by bytes
    assert [k for t in tasks for k in _keys(t)] == every  # each once, in (partition, offset)
    assert [len(_keys(t)) for t in plan.tasks(5, 128 << 20)] == [2] * 6  # at least 5
    # as many tasks as slices wanted, or slices as big as the cap: one slice per task
    assert plan.tasks(12, 128 << 20) == plan.pieces
    assert plan.tasks(1, 1000) == plan.pieces
    assert [len(_keys(t)) for t in plan.tasks(1, 3500)] == [3, 3, 3, 3]  # never over the cap


def test_hot_ranges_are_tasks_of_their_own_between_packed_cold_runs() -> None:
    opts = OPTS.with_(hot_chunk_records=40)
    plan = plan_pieces(opts, FILES, {0: (0, 300), 1: (0, 60)}, {0: 200, 1: 50}, Bounds())
    tasks = plan.tasks(1, 128 << 20)
    assert [type(t).__name__ for t in tasks] == [
        "ColdGroup",  # k/0/0 and k/0/100
        "HotRange",
        "HotRange",
        "HotRange",
        "ColdSlice",  # k/1/0: a hot range lies between it and partition 0's files
        "HotRange",
    ]
    assert _keys(tasks[0]) == ["k/0/0", "k/0/100"]


def test_cold_end_and_offset_resolution() -> None:
    assert cold_end(FILES[0]) == 200 and cold_end([]) is None
    assert resolve("earliest", 0, 5, 9, -2) == 5 and resolve("latest", 0, 5, 9, -2) == 9
    assert resolve({0: 7, 1: -1}, 1, 5, 9, -2) == 9
    assert resolve({0: 7}, 3, 5, 9, -2) == 5 and resolve({0: 7}, 3, 5, 9, -1) == 9


def test_max_records_per_trigger_is_shared_by_backlog() -> None:
    assert cap({"0": 0, "1": 0}, {"0": 10, "1": 10}, 100) == {"0": 10, "1": 10}
    assert cap({"0": 0, "1": 0}, {"0": 900, "1": 100}, 100) == {"0": 90, "1": 10}
    assert cap({"0": 5, "1": 7}, {"0": 6, "1": 1007}, 10) == {"0": 6, "1": 16}
