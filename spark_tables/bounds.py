"""What a scan may skip: pushed-down Spark filters and options → ranges on partition, offset
and timestamp, tested against Delta file stats and Parquet row-group statistics.

Only the columns the cold files are organised by matter here (partition: the Delta partition
column; offset and timestamp: min/max statistics). Everything else Spark evaluates itself, and
the reader hands every filter back to Spark as well (pushFilters returns them all): pruning
only needs to be safe, never exact, so a filter it does not understand just prunes nothing.

Timestamps are ms since the epoch (the files' unit); Spark's literals are microseconds, so
bounds round towards keeping rows (ts > 1.5 ms keeps ts >= 2 ms, ts <= 1.5 ms keeps ts <= 1 ms).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any, NamedTuple

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_NEVER_NULL = ("topic", "partition", "offset", "timestamp")


class Bounds(NamedTuple):
    """A conjunction of ranges; None = unbounded. Upper bounds are exclusive."""

    partitions: frozenset[int] | None = None
    partition_lo: int = 0
    partition_hi: int | None = None
    offset_lo: int = 0
    offset_hi: int | None = None
    ts_lo: int | None = None
    ts_hi: int | None = None
    impossible: bool = False  # e.g. topic = 'another topic'

    # -- building ---------------------------------------------------------------------------

    def intersect(self, other: Bounds) -> Bounds:
        parts = self.partitions
        if other.partitions is not None:
            parts = other.partitions if parts is None else parts & other.partitions
        return Bounds(
            parts,
            max(self.partition_lo, other.partition_lo),
            _min(self.partition_hi, other.partition_hi),
            max(self.offset_lo, other.offset_lo),
            _min(self.offset_hi, other.offset_hi),
            _max(self.ts_lo, other.ts_lo),
            _min(self.ts_hi, other.ts_hi),
            self.impossible or other.impossible,
        )

    @property
    def empty(self) -> bool:
        return (
            self.impossible
            or self.partitions == frozenset()
            or (self.partition_hi is not None and self.partition_hi <= self.partition_lo)
            or (self.offset_hi is not None and self.offset_hi <= self.offset_lo)
            or (self.ts_lo is not None and self.ts_hi is not None and self.ts_hi <= self.ts_lo)
        )

    # -- testing ----------------------------------------------------------------------------

    def keeps_partition(self, p: int) -> bool:
        if self.partitions is not None and p not in self.partitions:
            return False
        return p >= self.partition_lo and (self.partition_hi is None or p < self.partition_hi)

    def overlaps(
        self,
        min_offset: int | None,
        max_offset: int | None,
        min_ts: int | None,
        max_ts: int | None,
    ) -> bool:
        """Could a file or row group with these (inclusive) min/max hold a wanted row?
        Unknown statistics (None) never prune."""
        if self.empty:
            return False
        if max_offset is not None and max_offset < self.offset_lo:
            return False
        if min_offset is not None and self.offset_hi is not None and min_offset >= self.offset_hi:
            return False
        if max_ts is not None and self.ts_lo is not None and max_ts < self.ts_lo:
            return False
        return not (min_ts is not None and self.ts_hi is not None and min_ts >= self.ts_hi)

    def covers(
        self,
        min_offset: int | None,
        max_offset: int | None,
        min_ts: int | None,
        max_ts: int | None,
    ) -> bool:
        """Is every row of a file with these min/max wanted (no row group to skip)?"""
        if min_offset is None or max_offset is None:
            return False
        if min_offset < self.offset_lo or (
            self.offset_hi is not None and max_offset >= self.offset_hi
        ):
            return False
        if self.ts_lo is not None and (min_ts is None or min_ts < self.ts_lo):
            return False
        return self.ts_hi is None or (max_ts is not None and max_ts < self.ts_hi)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def time_bounds(start_ms: int | None, end_ms: int | None) -> Bounds:
    """startingTimestamp / endingTimestamp options: start <= timestamp < end."""
    return Bounds(ts_lo=start_ms, ts_hi=end_ms)


# -- Spark filters ----------------------------------------------------------------------------


def bounds_from_filters(filters: Iterable[Filter], topic: str) -> Bounds:
    """The AND of the filters Spark pushed, as far as they bound partition/offset/timestamp."""
    out = Bounds()
    for f in filters:
        out = out.intersect(_one(f, topic))
    return out


def _one(f: Filter, topic: str) -> Bounds:
    attr: tuple[str, ...] = getattr(f, "attribute", ())
    if len(attr) != 1:
        return Bounds()
    col = attr[0].lower()
    if isinstance(f, IsNull):
        return Bounds(impossible=col in _NEVER_NULL)
    value: Any = getattr(f, "value", None)
    if col == "topic":
        if isinstance(f, EqualTo | EqualNullSafe):
            return Bounds(impossible=value != topic)
        if isinstance(f, In):
            return Bounds(impossible=topic not in value)
        return Bounds()
    if col == "partition":
        return _partition(f, value)
    if col == "offset":
        lo, hi = _int_range(f, value)
        return Bounds(offset_lo=max(0, lo) if lo is not None else 0, offset_hi=hi)
    if col == "timestamp":
        lo, hi = _ts_range(f, value)
        return Bounds(ts_lo=lo, ts_hi=hi)
    return Bounds()


def _partition(f: Filter, value: Any) -> Bounds:
    if isinstance(f, EqualTo | EqualNullSafe) and _is_int(value):
        return Bounds(partitions=frozenset([value]))
    if isinstance(f, In) and all(_is_int(v) for v in value if v is not None):
        return Bounds(partitions=frozenset(v for v in value if v is not None))
    lo, hi = _int_range(f, value)
    return Bounds(partition_lo=max(0, lo) if lo is not None else 0, partition_hi=hi)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_range(f: Filter, value: Any) -> tuple[int | None, int | None]:
    """[lo, hi) of an integer column under one comparison (None: unbounded)."""
    if isinstance(f, In):
        vals = [v for v in value if v is not None]
        if not vals:
            return 0, 0  # IN (NULL) matches nothing
        if not all(_is_int(v) for v in vals):
            return None, None
        return min(vals), max(vals) + 1
    if not _is_int(value):
        return None, None
    return _compared(f, value, value)


def _compared(f: Filter, floor: int, ceil: int) -> tuple[int | None, int | None]:
    """[lo, hi) of the integers a comparison keeps, its literal lying in [floor, ceil] (equal
    for an integer literal; the integers around it for a finer one, rounded to keep rows)."""
    if isinstance(f, EqualTo | EqualNullSafe):
        return (floor, floor + 1) if floor == ceil else (0, 0)
    if isinstance(f, GreaterThan):
        return floor + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return ceil, None
    if isinstance(f, LessThan):
        return None, ceil
    if isinstance(f, LessThanOrEqual):
        return None, floor + 1
    return None, None


def to_micros(value: Any) -> int | None:
    """A Spark timestamp literal (datetime; naive = UTC) → µs since the epoch."""
    if not isinstance(value, dt.datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    delta: dt.timedelta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _ts_range(f: Filter, value: Any) -> tuple[int | None, int | None]:
    """[lo, hi) in ms for a comparison against a µs literal, rounding so as to keep rows."""
    if isinstance(f, In):
        us = [to_micros(v) for v in value if v is not None]
        if not us or any(u is None for u in us):
            return None, None
        known = [u for u in us if u is not None]
        return -(-min(known) // 1000), max(known) // 1000 + 1
    us_ = to_micros(value)
    if us_ is None:
        return None, None
    return _compared(f, us_ // 1000, -(-us_ // 1000))
