"""Produce input → RECORD_SCHEMA batches: JSON rules and errors, build_batch, partitions and
splits. (Arrow input is in test_logformat_arrow_records.py.)"""

from __future__ import annotations

import base64
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logformat.errors import ErrorCode, TierlogError
from logformat.frame import decode_records, encode_frame
from logformat.partitioner import StickyPartitioner, partition_for_key
from logformat.records import (
    MAX_TIMESTAMP_MS,
    build_batch,
    parse_json_records,
    resolve_partitions,
    split_by_partition,
    with_offset_deltas,
)
from logformat.schema import RECORD_SCHEMA

NOW = 1_700_000_000_000


def parse_one(rec):
    p = parse_json_records([rec])
    return p.keys[0], p.values[0], p.headers[0], p.timestamps[0], p.partitions[0]


def invalid(records, *needles, code=ErrorCode.INVALID_RECORD):
    with pytest.raises(TierlogError) as info:
        parse_json_records(records)
    assert info.value.code == code
    for needle in needles:
        assert needle in info.value.message
    return info.value


# ------------------------------------------------------------------------------- JSON


def test_json_key_and_value_encodings():
    assert parse_one({"key": "ключ", "value": "v"})[:2] == ("ключ".encode(), b"v")
    assert (
        parse_one({"value": {"b": [1, 2.5, None], "a": True}})[1] == b'{"b":[1,2.5,null],"a":true}'
    )
    assert parse_one({"key": 5, "value": [1, "x"]})[:2] == (b"5", b'[1,"x"]')
    assert parse_one({"key": True, "value": False})[:2] == (b"true", b"false")
    assert parse_one({"value": 1.5})[1] == b"1.5"
    assert parse_one({"value": ""})[1] == b""
    # Missing or null value = tombstone; missing or null key = null key.
    assert parse_one({})[:2] == (None, None)
    assert parse_one({"key": None, "value": None})[:2] == (None, None)


def test_json_b64_fields():
    raw = bytes(range(256))
    b64 = base64.b64encode(raw).decode()
    assert parse_one({"key_b64": b64, "value_b64": b64})[:2] == (raw, raw)
    assert parse_one({"key_b64": None, "value_b64": ""})[:2] == (None, b"")


def test_json_headers_forms():
    expected = [{"key": "a", "value": b"1"}, {"key": "b", "value": None}]
    assert parse_one({"headers": {"a": "1", "b": None}})[2] == expected
    assert parse_one({"headers": [{"key": "a", "value": "1"}, {"key": "b"}]})[2] == expected
    assert parse_one({"headers": [["a", "1"], ["b", None]]})[2] == expected
    assert (
        parse_one(
            {"headers": [{"key": "a", "value_b64": "MQ=="}, {"key": "b", "value_b64": None}]}
        )[2]
        == expected
    )
    # Repeated names keep order in the list forms; empty = no headers.
    assert parse_one({"headers": [["a", "1"], ["a", "2"]]})[2] == [
        {"key": "a", "value": b"1"},
        {"key": "a", "value": b"2"},
    ]
    assert parse_one({"headers": {}})[2] is None
    assert parse_one({"headers": []})[2] is None


def test_json_timestamp_and_partition():
    assert parse_one({"timestamp": 0, "partition": 0})[3:] == (0, 0)
    assert parse_one({"timestamp": MAX_TIMESTAMP_MS, "partition": 3})[3:] == (MAX_TIMESTAMP_MS, 3)
    assert parse_one({"value": "x"})[3:] == (None, None)


@pytest.mark.parametrize(
    ("rec", "field"),
    [
        ({"key": "a", "key_b64": "YQ=="}, "key"),
        ({"key": None, "key_b64": "YQ=="}, "key"),
        ({"value": "a", "value_b64": None}, "value"),
        ({"key_b64": "not base64!"}, "key_b64"),
        ({"value_b64": "YQ="}, "value_b64"),
        ({"value_b64": 5}, "value_b64"),
        ({"value": 2**70}, "value"),
        ({"timestamp": -1}, "timestamp"),
        ({"timestamp": 1.5}, "timestamp"),
        ({"timestamp": "123"}, "timestamp"),
        ({"timestamp": True}, "timestamp"),
        ({"timestamp": MAX_TIMESTAMP_MS + 1}, "timestamp"),
        ({"partition": -1}, "partition"),
        ({"partition": "1"}, "partition"),
        ({"partition": 1.0}, "partition"),
        ({"partition": False}, "partition"),
        ({"partition": 2**31}, "partition"),
        ({"headers": "a=b"}, "headers"),
        ({"headers": 5}, "headers"),
        ({"headers": {"a": 1}}, "headers"),
        ({"headers": {"a": ["x"]}}, "headers"),
        ({"headers": [["a"]]}, "headers"),
        ({"headers": [[1, "x"]]}, "headers"),
        ({"headers": [{"key": "a", "value": "x", "value_b64": "eA=="}]}, "headers"),
        ({"headers": [{"name": "a", "value": "x"}]}, "headers"),
        ({"headers": [{"key": "a", "value_b64": "!!"}]}, "headers"),
        ({"headers": ["a"]}, "headers"),
        ({"vaule": "typo"}, "vaule"),
    ],
)
def test_json_errors_name_index_and_field(rec, field):
    invalid([{"value": "ok"}, rec], "record 1", repr(field))


def test_json_non_object_record_and_non_list():
    invalid([{"value": "a"}, "x"], "record 1", "object")
    invalid([None], "record 0")
    invalid({"value": "a"}, "array", code=ErrorCode.INVALID_REQUEST)
    assert parse_json_records([]) == ([], [], [], [], [])


def test_build_batch():
    p = parse_json_records(
        [
            {"key": "a", "value": "1", "timestamp": 5, "headers": {"h": "v"}},
            {"value": None},
            {"key_b64": "AP8=", "value": {"x": 1}, "partition": 2},
        ]
    )
    batch = build_batch(p.keys, p.values, p.headers, p.timestamps, NOW)
    assert batch.schema.equals(RECORD_SCHEMA)
    assert batch.column(0).to_pylist() == [0, 1, 2]
    assert batch.column(1).cast(pa.int64()).to_pylist() == [5, NOW, NOW]
    assert batch.column(2).to_pylist() == [b"a", None, b"\x00\xff"]
    assert batch.column(3).to_pylist() == [b"1", None, b'{"x":1}']
    assert batch.column(4).to_pylist() == [[{"key": "h", "value": b"v"}], None, None]
    assert decode_records(encode_frame(batch)).equals(batch)
    # No headers nor timestamps at all: whole-column shortcuts.
    plain = build_batch([b"k"], [b"v"], [None], [None], NOW)
    assert plain.column(4).null_count == 1 and plain.column(1).cast(pa.int64())[0].as_py() == NOW
    assert build_batch([], [], [], [], NOW).num_rows == 0


# ------------------------------------------------------------------ partitions, splits


def test_resolve_partitions():
    keys = pa.array([b"a", None, b"b", None], pa.binary())
    sticky = StickyPartitioner(rng=random.Random(2))
    got = resolve_partitions(None, keys, 5, sticky).to_pylist()
    assert got[0] == partition_for_key(b"a", 5) and got[2] == partition_for_key(b"b", 5)
    assert got[1] == got[3] == sticky.current
    explicit = pa.array([4, None, None, 0], pa.int32())
    got = resolve_partitions(explicit, keys, 5, sticky).to_pylist()
    assert got[0] == 4 and got[3] == 0 and got[2] == partition_for_key(b"b", 5)
    full = pa.array([1, 2, 3, 4], pa.int32())
    assert resolve_partitions(full, keys, 5) is full
    # All keys null: sticky runs, no per-record Python work.
    nulls = pa.nulls(10, pa.binary())
    got = resolve_partitions(None, nulls, 3, StickyPartitioner(records_per_stick=5)).to_pylist()
    assert len(set(got[:5])) == 1 and len(set(got[5:])) == 1
    got = resolve_partitions(pa.array([2, None], pa.int32()), pa.nulls(2, pa.binary()), 3)
    assert got.to_pylist()[0] == 2 and 0 <= got.to_pylist()[1] < 3


def test_split_by_partition_keeps_order_and_renumbers():
    n = 50
    batch = build_batch(
        [str(i).encode() for i in range(n)], [None] * n, [None] * n, list(range(n)), NOW
    )
    parts = pa.array([i % 3 if i % 7 else 2 for i in range(n)], pa.int32())
    out = split_by_partition(batch, parts, 4)
    assert sorted(out) == [0, 1, 2]
    for p, b in out.items():
        keys = [int(k) for k in b.column(2).to_pylist()]
        assert keys == [i for i in range(n) if parts[i].as_py() == p]
        assert b.column(0).to_pylist() == list(range(b.num_rows))
        assert b.column(1).cast(pa.int64()).to_pylist() == keys
        assert decode_records(encode_frame(b)).equals(b)


def test_split_single_partition_empty_and_errors():
    batch = build_batch([b"a", b"b"], [None, None], [None, None], [None, None], NOW)
    sliced = batch.slice(1, 1)
    assert split_by_partition(sliced, pa.array([3], pa.int32()), 4)[3].column(0).to_pylist() == [0]
    assert split_by_partition(batch.slice(0, 0), pa.array([], pa.int32()), 4) == {}
    for bad in (4, -1):
        with pytest.raises(TierlogError) as info:
            split_by_partition(batch, pa.array([0, bad], pa.int32()), 4)
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert str(bad) in info.value.message
    with pytest.raises(ValueError):
        split_by_partition(batch, pa.array([0, None], pa.int32()), 4)
    with pytest.raises(ValueError):
        split_by_partition(batch, pa.array([0], pa.int32()), 4)


def test_with_offset_deltas():
    batch = build_batch([b"a"] * 5, [None] * 5, [None] * 5, [None] * 5, NOW)
    out = with_offset_deltas(batch.filter(pa.array([False, True, False, True, True])))
    assert out.column(0).to_pylist() == [0, 1, 2] and out.schema.equals(RECORD_SCHEMA)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=8)), st.integers(0, 5)), max_size=60)
)
def test_split_partitions_cover_every_record(rows):
    batch = build_batch(
        [k for k, _ in rows], [None] * len(rows), [None] * len(rows), [None] * len(rows), NOW
    )
    parts = pa.array([p for _, p in rows], pa.int32())
    out = split_by_partition(batch, parts, 6)
    assert sum(b.num_rows for b in out.values()) == len(rows)
    for p, b in out.items():
        assert b.column(2).to_pylist() == [k for k, q in rows if q == p]
