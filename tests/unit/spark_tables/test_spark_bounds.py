"""Pushed-down filters → the ranges that prune files and row groups."""

from __future__ import annotations

import datetime as dt

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from spark_tables.bounds import Bounds, bounds_from_filters, to_micros

UTC = dt.UTC


def b(*filters: object) -> Bounds:
    return bounds_from_filters(filters, "orders")  # type: ignore[arg-type]


def test_partition_filters() -> None:
    assert b(EqualTo(("partition",), 2)).partitions == frozenset({2})
    got = b(In(("partition",), (0, 3, None)), GreaterThan(("partition",), 0))
    assert [p for p in range(5) if got.keeps_partition(p)] == [3]
    assert b(LessThanOrEqual(("partition",), 1)).partition_hi == 2
    assert b(EqualTo(("partition",), 1), EqualTo(("partition",), 2)).empty


def test_offset_filters() -> None:
    got = b(GreaterThanOrEqual(("offset",), 10), LessThan(("offset",), 20))
    assert (got.offset_lo, got.offset_hi) == (10, 20)
    got = b(GreaterThan(("offset",), 10), LessThanOrEqual(("offset",), 20))
    assert (got.offset_lo, got.offset_hi) == (11, 21)
    got = b(In(("offset",), (7, 3, 5)))
    assert (got.offset_lo, got.offset_hi) == (3, 8)
    assert b(EqualTo(("offset",), 4)).overlaps(0, 4, None, None)
    assert not b(EqualTo(("offset",), 4)).overlaps(5, 9, None, None)
    assert b(GreaterThan(("offset",), 5), LessThan(("offset",), 6)).empty


def test_timestamps_round_towards_keeping_rows() -> None:
    t = dt.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)  # 1.5 ms past the second
    ms = to_micros(t) // 1000  # type: ignore[operator]
    assert b(GreaterThan(("timestamp",), t)).ts_lo == ms + 1
    assert b(GreaterThanOrEqual(("timestamp",), t)).ts_lo == ms + 1
    assert b(LessThan(("timestamp",), t)).ts_hi == ms + 1
    assert b(LessThanOrEqual(("timestamp",), t)).ts_hi == ms + 1
    assert b(EqualTo(("timestamp",), t)).empty  # no ms timestamp equals it
    whole = dt.datetime(2024, 1, 1, tzinfo=UTC)
    wms = to_micros(whole) // 1000  # type: ignore[operator]
    assert (b(EqualTo(("timestamp",), whole)).ts_lo, b(EqualTo(("timestamp",), whole)).ts_hi) == (
        wms,
        wms + 1,
    )
    naive = dt.datetime(2024, 1, 1)  # timestamp_ntz literals: UTC wall clock
    assert to_micros(naive) == to_micros(whole)


def test_other_topics_and_impossible_nulls_match_nothing() -> None:
    assert b(EqualTo(("topic",), "other")).empty
    assert not b(EqualTo(("topic",), "orders")).empty
    assert b(In(("topic",), ("a", "b"))).empty
    assert b(IsNull(("offset",))).empty
    assert not b(IsNull(("key",))).empty


def test_filters_it_does_not_understand_prune_nothing() -> None:
    for f in (
        Not(EqualTo(("partition",), 1)),
        IsNotNull(("value",)),
        StringStartsWith(("topic",), "o"),
        EqualTo(("value", "n"), 3),
        GreaterThan(("offset",), "x"),
        EqualTo(("key",), b"k"),
    ):
        assert b(f) == Bounds(), f


def test_covers_and_overlaps_with_unknown_statistics() -> None:
    window = Bounds(offset_lo=10, offset_hi=20, ts_lo=100, ts_hi=200)
    assert window.covers(10, 19, 100, 199)
    assert not window.covers(10, 20, 100, 199)
    assert not window.covers(10, 19, 99, 199)
    assert window.overlaps(None, None, None, None)  # no stats: never pruned
    assert not window.covers(None, None, None, None)
    assert not window.overlaps(0, 9, 100, 199)
    assert not window.overlaps(10, 19, 200, 300)
