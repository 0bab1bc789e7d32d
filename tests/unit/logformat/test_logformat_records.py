"""Produce input → RECORD_SCHEMA batches: JSON rules and errors, Arrow normalization, splits."""

from __future__ import annotations

import base64
import contextlib
import random
from datetime import UTC, datetime

import orjson
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
    normalize_arrow,
    parse_json_records,
    read_arrow_stream,
    resolve_partitions,
    split_by_partition,
    with_offset_deltas,
)
from logformat.schema import HEADERS, RECORD_SCHEMA

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


# ------------------------------------------------------------------------------ Arrow


def norm(cols, now_ms=NOW):
    return normalize_arrow(pa.table(cols), now_ms)


BINARY_TYPES = [pa.binary(), pa.large_binary(), pa.string(), pa.large_string()]
BINARY_TYPES += [pa.binary_view(), pa.string_view()]


@pytest.mark.parametrize("typ", BINARY_TYPES)
def test_arrow_key_value_types(typ):
    src = ["a", None, "ü"]
    data = [None if s is None else (s.encode() if "binary" in str(typ) else s) for s in src]
    out = norm({"key": pa.array(data, typ), "value": pa.array(data, typ)}).batch
    assert out.schema.equals(RECORD_SCHEMA)
    expected = [None if s is None else s.encode() for s in src]
    assert out.column(2).to_pylist() == expected == out.column(3).to_pylist()
    assert out.column(0).to_pylist() == [0, 1, 2]


def test_arrow_absent_null_dictionary_and_fixed_columns():
    out = norm({"value": pa.array([b"x", b"y"])}).batch
    assert out.column(2).to_pylist() == [None, None]
    assert out.column(4).to_pylist() == [None, None]
    assert out.column(1).cast(pa.int64()).to_pylist() == [NOW, NOW]
    out = norm({"key": pa.nulls(2), "value": pa.array(["a", "b"]).dictionary_encode()}).batch
    assert out.column(2).to_pylist() == [None, None]
    assert out.column(3).to_pylist() == [b"a", b"b"]
    out = norm({"key": pa.array([b"ab"], pa.binary(2))}).batch
    assert out.column(2).to_pylist() == [b"ab"]


HEADER_INPUTS = [
    pa.array(
        [[{"key": "a", "value": b"1"}], None, []],
        pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
    ),
    pa.array(
        [[{"key": "a", "value": "1"}], None, []],
        pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())])),
    ),
    pa.array(
        [[{"value": "1", "key": "a"}], None, []],
        pa.large_list(pa.struct([("value", pa.large_binary()), ("key", pa.large_string())])),
    ),
    pa.array([[("a", b"1")], None, []], pa.map_(pa.string(), pa.binary())),
    pa.array([[("a", "1")], None, []], pa.map_(pa.string(), pa.string())),
    pa.array([[{"key": "a", "value": b"1"}], None, []], HEADERS),
]


@pytest.mark.parametrize("headers", HEADER_INPUTS, ids=lambda a: str(a.type))
def test_arrow_header_types(headers):
    out = norm({"value": pa.array([b"x"] * 3), "headers": headers}).batch
    assert out.schema.equals(RECORD_SCHEMA)
    assert out.column(4).to_pylist() == [[{"key": "a", "value": b"1"}], None, []]
    assert decode_records(encode_frame(out)).equals(out)


@pytest.mark.parametrize(
    "headers",
    [
        pa.array(
            [[{"key": None, "value": "1"}]],
            pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())])),
        ),
        pa.array([["a"]], pa.list_(pa.string())),
        pa.array(
            [[{"key": 1, "value": "1"}]],
            pa.list_(pa.struct([("key", pa.int32()), ("value", pa.string())])),
        ),
        pa.array(
            [[{"k": "a", "value": "1"}]],
            pa.list_(pa.struct([("k", pa.string()), ("value", pa.string())])),
        ),
        pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64())),
        pa.array([{"a": 1}]),
    ],
    ids=lambda a: str(a.type),
)
def test_arrow_bad_headers(headers):
    with pytest.raises(TierlogError) as info:
        norm({"headers": headers})
    assert info.value.code == ErrorCode.INVALID_RECORD and "headers" in info.value.message


@pytest.mark.parametrize(
    ("arr", "expected"),
    [
        (pa.array([1, 2, None], pa.timestamp("s")), [1000, 2000, NOW]),
        (pa.array([1, 2, None], pa.timestamp("ms", tz="UTC")), [1, 2, NOW]),
        (pa.array([1999, 2000, None], pa.timestamp("us", tz="Asia/Tokyo")), [1, 2, NOW]),
        (pa.array([1_999_999, 2_000_000, None], pa.timestamp("ns")), [1, 2, NOW]),
        (pa.array([1, 2, None], pa.int64()), [1, 2, NOW]),
        (pa.array([1, 2, None], pa.uint32()), [1, 2, NOW]),
        (pa.nulls(3), [NOW, NOW, NOW]),
    ],
    ids=lambda x: str(getattr(x, "type", "")),
)
def test_arrow_timestamps(arr, expected):
    out = norm({"timestamp": arr}).batch
    assert out.column(1).type == RECORD_SCHEMA.field("timestamp").type
    assert out.column(1).cast(pa.int64()).to_pylist() == expected


def test_arrow_timestamp_from_datetimes():
    dt = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    out = norm({"timestamp": pa.array([dt])}).batch
    assert out.column(1)[0].as_py() == dt.replace(microsecond=123000)


@pytest.mark.parametrize(
    "arr",
    [
        pa.array([-1], pa.int64()),
        pa.array([-1], pa.timestamp("us")),
        pa.array([MAX_TIMESTAMP_MS + 1], pa.int64()),
        pa.array([2**62], pa.timestamp("s")),
        pa.array(["2024-01-01"]),
        pa.array([1.5]),
    ],
    ids=lambda a: str(a.type),
)
def test_arrow_bad_timestamps(arr):
    with pytest.raises(TierlogError) as info:
        norm({"timestamp": arr})
    assert info.value.code == ErrorCode.INVALID_RECORD and "timestamp" in info.value.message


@pytest.mark.parametrize(
    "typ", [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint64()]
)
def test_arrow_partition_types(typ):
    parts = norm(
        {"value": pa.array([b"a", b"b"]), "partition": pa.array([1, None], typ)}
    ).partitions
    assert parts is not None and parts.type == pa.int32() and parts.to_pylist() == [1, None]


def test_arrow_partition_absent_and_errors():
    assert norm({"value": pa.array([b"a"])}).partitions is None
    assert norm({"value": pa.array([b"a"]), "partition": pa.nulls(1)}).partitions is None
    for arr in (pa.array([-1]), pa.array([2**40]), pa.array(["1"]), pa.array([1.0])):
        with pytest.raises(TierlogError) as info:
            norm({"partition": arr})
        assert info.value.code == ErrorCode.INVALID_RECORD and "partition" in info.value.message


@pytest.mark.parametrize(
    ("cols", "needle"),
    [
        ({"value": pa.array([b"a"]), "extra": pa.array([1]), "more": pa.array([2])}, "extra"),
        ({"key": pa.array([1])}, "key"),
        ({"value": pa.array([[b"a"]])}, "value"),
    ],
)
def test_arrow_unknown_and_mistyped_columns(cols, needle):
    with pytest.raises(TierlogError) as info:
        norm(cols)
    assert info.value.code == ErrorCode.INVALID_RECORD and needle in info.value.message


def test_arrow_chunked_table_and_record_batch():
    t1 = pa.table({"key": pa.array([b"a"]), "value": pa.array(["x"])})
    t2 = pa.table({"key": pa.array([b"b"]), "value": pa.array(["y"])})
    table = pa.concat_tables([t1, t2])
    assert table.column("key").num_chunks == 2
    out = normalize_arrow(table, NOW).batch
    assert out.column(2).to_pylist() == [b"a", b"b"] and out.column(0).to_pylist() == [0, 1]
    rb = pa.RecordBatch.from_pydict({"value": pa.array(["z"])})
    assert normalize_arrow(rb, NOW).batch.column(3).to_pylist() == [b"z"]
    empty = normalize_arrow(t1.slice(0, 0), NOW).batch
    assert empty.num_rows == 0 and empty.schema.equals(RECORD_SCHEMA)


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


# ------------------------------------------------------------------------- IPC stream


def ipc_stream(table, **kw):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, **kw) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def test_read_arrow_stream_round_trip():
    table = pa.table(
        {"key": pa.array([b"a", None]), "value": pa.array(["x", "y"]), "partition": [0, 1]}
    )
    assert read_arrow_stream(ipc_stream(table)).equals(table)
    opts = pa.ipc.IpcWriteOptions(compression="zstd")
    assert read_arrow_stream(ipc_stream(table, options=opts)).equals(table)
    assert read_arrow_stream(memoryview(ipc_stream(table))).equals(table)


def test_read_arrow_stream_rejects_garbage():
    table = pa.table({"value": pa.array(["x" * 100] * 10)})
    good = ipc_stream(table)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    file_format = sink.getvalue().to_pybytes()
    bad_offsets = bytearray(good)
    at = good.index(b"x" * 100) - 8  # inside the offsets buffer, just before the data
    bad_offsets[at : at + 4] = (2**31 - 1).to_bytes(4, "little")
    for body in (
        b"",
        b"not arrow",
        good[: len(good) // 2],
        file_format,
        bytes(bad_offsets),
        orjson.dumps({}),
    ):
        with pytest.raises(TierlogError) as info:
            read_arrow_stream(body)
        assert info.value.code == ErrorCode.INVALID_RECORD and "Arrow IPC" in info.value.message


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_read_arrow_stream_only_raises_tierlog_errors(data):
    good = bytearray(
        ipc_stream(pa.table({"key": [b"k", None], "value": ["v", "w"], "partition": [1, 2]}))
    )
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(good) - 1))
        good[i] = data.draw(st.integers(0, 255))
    body = bytes(good[: data.draw(st.integers(0, len(good)))])
    try:
        table = read_arrow_stream(body)
    except TierlogError as exc:
        assert exc.code == ErrorCode.INVALID_RECORD
        return
    with contextlib.suppress(TierlogError):  # whatever read back is safe to compute on
        normalize_arrow(table, NOW)
