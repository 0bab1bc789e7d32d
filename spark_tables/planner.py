"""Which bytes a scan reads: cold files and row groups, and hot offset ranges (docs/design.md §6).

Input: per partition the offset range [lo, hi) to read, where the hot tier starts (None:
cold only), the cold file list, and the filter bounds. Output: Spark input partitions in
(partition, offset) order —

- `ColdSlice`: one data file, or part of one. A file the bounds cover entirely and no
  bigger than maxPartitionBytes is read whole (one GET, no footer read here). Any other file
  (bigger, or cut by the bounds at an offset or time window's edge) gets its footer read
  here: only the row groups whose statistics overlap the bounds are planned, in runs of
  consecutive row groups of up to maxPartitionBytes compressed bytes (so each task gets a
  real share of the rows, never an empty byte range); the footer travels with the slice, so
  the executor does not fetch it again.
- `HotRange`: [start, end) of one partition from the brokers, in chunks.

The pieces become Spark tasks (`tasks`): consecutive cold slices are packed into one
`ColdGroup` up to a share of the scan's cold bytes (total / minPartitions, at most
maxPartitionBytes), as Spark's own file sources pack small files. Each task of a Python data
source has a fixed cost (a round trip through a Python worker: tens of ms on a small
machine), so a scan of many small files as one task each spends a large share of its time
there (docs/benchmarks.md, "Spark").

Files whose Delta stats / partition value fall outside the bounds are never opened. The
plan counts what it lists and what it will read; the reader reports it (`reportDir`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql.datasource import InputPartition

from spark_tables.bounds import Bounds
from spark_tables.cold_files import ColdFileInfo
from spark_tables.options import SourceOptions
from spark_tables.parquet_read import (
    RowGroupStats,
    read_metadata,
    row_group_stats,
    select_row_groups,
)


@dataclass
class ColdSlice(InputPartition):
    file: ColdFileInfo
    bounds: Bounds  # the rows wanted (offset range of this partition ∩ filters)
    row_groups: tuple[int, ...] | None = None  # planned from the footer ...
    byte_range: tuple[int, int] | None = None  # ... or chosen by midpoint at read time
    metadata: pq.FileMetaData | None = field(default=None, repr=False)
    planned_bytes: int = 0

    @property
    def partition(self) -> int:
        return self.file.partition


@dataclass
class HotRange(InputPartition):
    partition: int
    start: int
    end: int  # exclusive; a high watermark seen when planning
    bounds: Bounds = field(default_factory=Bounds)  # row filter (timestamps)


@dataclass
class ColdGroup(InputPartition):
    """Consecutive cold slices read one after the other in one Spark task."""

    slices: tuple[ColdSlice, ...]


Piece = ColdSlice | HotRange


@dataclass
class ScanPlan:
    pieces: list[Piece]
    files_listed: int = 0
    bytes_listed: int = 0
    footers_read: int = 0
    footer_bytes: int = 0  # read here, while planning

    @property
    def cold(self) -> list[ColdSlice]:
        return [p for p in self.pieces if isinstance(p, ColdSlice)]

    @property
    def hot(self) -> list[HotRange]:
        return [p for p in self.pieces if isinstance(p, HotRange)]

    def tasks(self, min_partitions: int, limit: int) -> list[Piece | ColdGroup]:
        """The pieces as Spark input partitions, in order: runs of consecutive cold slices
        packed to about total cold bytes / `min_partitions` each (never over `limit` bytes,
        unless one slice is); a hot range is a task of its own."""
        cold_bytes = sum(s.planned_bytes for s in self.cold)
        share = min(limit, max(1, -(-cold_bytes // max(1, min_partitions))))
        out: list[Piece | ColdGroup] = []
        run: list[ColdSlice] = []
        run_bytes = 0

        def close() -> None:
            if run:
                out.append(run[0] if len(run) == 1 else ColdGroup(tuple(run)))
                run.clear()

        for piece in self.pieces:
            if isinstance(piece, HotRange):
                close()
                out.append(piece)
                continue
            size = piece.planned_bytes
            # a slice joins the run while its midpoint is within the share: balanced runs
            if run and (run_bytes + size // 2 > share or run_bytes + size > limit):
                close()
            if not run:
                run_bytes = 0
            run.append(piece)
            run_bytes += size
        close()
        return out

    def files_planned(self) -> list[str]:
        return sorted({s.file.key for s in self.cold})

    def report(self) -> dict[str, Any]:
        """A JSON summary: which files and row groups, which hot ranges, how many bytes."""
        row_groups: dict[str, list[int]] = {}
        for s in self.cold:
            if s.row_groups is not None:
                row_groups.setdefault(s.file.key, []).extend(s.row_groups)
        return {
            "kind": "plan",
            "files_listed": self.files_listed,
            "bytes_listed": self.bytes_listed,
            "files_planned": self.files_planned(),
            "bytes_planned": sum(s.planned_bytes for s in self.cold),
            "footers_read": self.footers_read,
            "footer_bytes": self.footer_bytes,
            "row_groups": row_groups,
            "hot": [[h.partition, h.start, h.end] for h in self.hot],
            "pieces": len(self.pieces),
        }


def plan_pieces(
    opts: SourceOptions,
    files: Mapping[int, Sequence[ColdFileInfo]],
    ranges: Mapping[int, tuple[int, int | None]],
    hot_from: Mapping[int, int],
    bounds: Bounds,
) -> ScanPlan:
    """`ranges`: per partition to read, [lo, hi) (hi None: to the end of the cold data).
    `hot_from`: per partition, the first offset to read from the brokers instead of cold
    files (absent: no hot read). Cold files at or above it are left to the hot read."""
    every = [f for fs in files.values() for f in fs]
    plan = ScanPlan([], len(every), sum(f.size for f in every))
    for p in sorted(ranges):
        lo, hi = ranges[p]
        hot = hot_from.get(p)
        cold_hi = hi if hot is None else (hot if hi is None else min(hi, hot))
        b = bounds.intersect(Bounds(offset_lo=lo, offset_hi=cold_hi))
        if not b.empty:
            for f in files.get(p, ()):
                if b.overlaps(f.min_offset, f.max_offset, f.min_timestamp, f.max_timestamp):
                    _plan_file(opts, f, b, plan)
        if hot is not None and hi is not None:
            start = max(lo, hot, bounds.offset_lo)
            end = hi if bounds.offset_hi is None else min(hi, bounds.offset_hi)
            step = max(1, opts.hot_chunk_records)
            hot_bounds = Bounds(ts_lo=bounds.ts_lo, ts_hi=bounds.ts_hi)
            for s in range(start, end, step):
                plan.pieces.append(HotRange(p, s, min(end, s + step), hot_bounds))
    return plan


def _plan_file(opts: SourceOptions, f: ColdFileInfo, b: Bounds, plan: ScanPlan) -> None:
    limit = max(1, opts.max_partition_bytes)
    if f.size <= limit and b.covers(f.min_offset, f.max_offset, f.min_timestamp, f.max_timestamp):
        plan.pieces.append(ColdSlice(f, b, planned_bytes=f.size))
        return
    # Cut by the bounds, or to be split: the footer's row-group statistics choose the row
    # groups and size the splits.
    md, footer_bytes = read_metadata(opts.store, f)
    plan.footers_read += 1
    plan.footer_bytes += footer_bytes
    stats = row_group_stats(md)
    for run, run_bytes in row_group_runs(stats, select_row_groups(stats, b), limit):
        plan.pieces.append(ColdSlice(f, b, run, metadata=md, planned_bytes=run_bytes))


def row_group_runs(
    stats: Sequence[RowGroupStats], chosen: Sequence[int], limit: int
) -> list[tuple[tuple[int, ...], int]]:
    """The chosen row groups in runs of consecutive ones of up to `limit` compressed bytes
    (a bigger row group is a run of its own), with each run's bytes."""
    out: list[tuple[tuple[int, ...], int]] = []
    run: list[int] = []
    run_bytes = 0
    for i in chosen:
        if run and (run_bytes + stats[i].size > limit or i != run[-1] + 1):
            out.append((tuple(run), run_bytes))
            run, run_bytes = [], 0
        run.append(i)
        run_bytes += stats[i].size
    if run:
        out.append((tuple(run), run_bytes))
    return out
