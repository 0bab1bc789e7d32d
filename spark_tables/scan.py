"""Offsets → plans: which partitions, which offset range of each, where the hot tier starts.

Batch (`batch_plan`): startingOffsets/endingOffsets resolved against the log now — "latest"
is the high watermark with includeHot, else the end of the cold data. The hot/cold seam of a
partition is its cold end (the offset after its last tiered record): cold files below it,
the brokers from it up to the high watermark, so each record is read exactly once.

Streaming (`log_ends`, `stream_plan`): a Spark offset is {"partition": next offset, ...};
each micro-batch reads [start, end) per partition, planned afresh from the current cold
files, so a batch replayed after a restart reads the same records even if they were tiered
(or their hot copy deleted) meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from spark_tables.bounds import Bounds, time_bounds
from spark_tables.cold_files import ColdFileInfo, ColdListing, cold_end, list_cold_files
from spark_tables.hot import describe
from spark_tables.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from spark_tables.planner import ScanPlan, plan_pieces


class LogEnds(NamedTuple):
    start: int  # earliest readable offset
    end: int  # latest: the next offset to be committed (high watermark) or tiered
    cold_end: int | None  # the hot/cold seam (None: nothing tiered)


def option_bounds(opts: SourceOptions) -> Bounds:
    return time_bounds(opts.starting_timestamp, opts.ending_timestamp)


def resolve(spec: OffsetSpec, partition: int, earliest: int, latest: int, missing: int) -> int:
    """An offset option for one partition; `missing`: EARLIEST or LATEST for partitions
    the JSON leaves out."""
    if spec == "earliest":
        return earliest
    if spec == "latest":
        return latest
    value = spec.get(partition, missing)
    return earliest if value == EARLIEST else latest if value == LATEST else value


def log_ends(
    opts: SourceOptions, live: bool, listing: ColdListing | None = None
) -> dict[int, LogEnds]:
    """Per partition, the readable range now: up to the last stable offset when `live` (the
    brokers), else up to the end of the cold data."""
    listing = listing if listing is not None else list_cold_files(opts)
    files = listing.by_partition()
    out: dict[int, LogEnds] = {}
    if live:
        assert opts.broker_url is not None
        for p, e in describe(opts.broker_url, opts.topic, opts.api_key).items():
            ce = cold_end(files.get(p, ()))
            first = _first_offset(files.get(p, ()))
            start = first if first is not None else e.log_start
            # From the log start across tiers (a DeleteRecords start may lie inside the first
            # cold file); to the last stable offset: past it a transaction is open (issue 30)
            out[p] = LogEnds(max(start, e.log_start), e.last_stable, ce)
        return out
    parts: Iterable[int] = (
        range(listing.partition_count) if listing.partition_count is not None else files
    )
    for p in parts:
        fs = files.get(p, ())
        ce = cold_end(fs)
        out[p] = LogEnds(_first_offset(fs) or 0, ce or 0, ce)
    return out


def _first_offset(files: Iterable[ColdFileInfo]) -> int | None:
    starts = [f.min_offset for f in files if f.min_offset is not None]
    return min(starts) if starts else None


def _wanted(opts: SourceOptions, bounds: Bounds, partitions: Iterable[int]) -> list[int]:
    return sorted(
        p
        for p in partitions
        if (opts.partitions is None or p in opts.partitions) and bounds.keeps_partition(p)
    )


def batch_plan(opts: SourceOptions, bounds: Bounds) -> ScanPlan:
    bounds = bounds.intersect(option_bounds(opts))
    listing = list_cold_files(opts)
    files = listing.by_partition()
    ends = log_ends(opts, opts.include_hot, listing)
    ranges: dict[int, tuple[int, int | None]] = {}
    hot_from: dict[int, int] = {}
    for p in _wanted(opts, bounds, ends):
        e = ends[p]
        # never past the high watermark: nothing above it is committed (or readable)
        ranges[p] = (
            resolve(opts.starting_offsets, p, e.start, e.end, EARLIEST),
            min(e.end, resolve(opts.ending_offsets, p, e.start, e.end, LATEST)),
        )
        if opts.include_hot:
            hot_from[p] = e.cold_end if e.cold_end is not None else e.start
    if bounds.empty:
        ranges = {}
    return plan_pieces(opts, files, ranges, hot_from, bounds)


def stream_plan(
    opts: SourceOptions, start: Mapping[str, int], end: Mapping[str, int], live: bool
) -> ScanPlan:
    """Input partitions for one micro-batch: [start[p], end[p]) of every partition."""
    bounds = option_bounds(opts)
    listing = list_cold_files(opts)
    files = listing.by_partition()
    ranges: dict[int, tuple[int, int | None]] = {}
    hot_from: dict[int, int] = {}
    for key, hi in end.items():
        p = int(key)
        lo = int(start.get(key, 0))
        if hi <= lo:
            continue
        ranges[p] = (lo, hi)
        if live:
            ce = cold_end(files.get(p, ()))
            hot_from[p] = ce if ce is not None else lo
    return plan_pieces(opts, files, ranges, hot_from, bounds)
