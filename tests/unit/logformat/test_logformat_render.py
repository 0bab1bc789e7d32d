"""Consumer output: CONSUMER_SCHEMA batches and fetch JSON, incl. produce → fetch round trips."""

from __future__ import annotations

import base64

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logformat.frame import decode_records, encode_frame
from logformat.records import (
    build_batch,
    normalize_arrow,
    parse_json_records,
    render_json_records,
    to_consumer_batch,
)
from logformat.schema import CONSUMER_SCHEMA

NOW = 1_700_000_000_000
B64 = base64.b64encode


def stored(keys, values, headers=None, timestamps=None, base_offset=0):
    n = len(keys)
    batch = build_batch(keys, values, headers or [None] * n, timestamps or [None] * n, NOW)
    # Through a real frame, as fetch sees it.
    return to_consumer_batch(decode_records(encode_frame(batch, compression="zstd")), base_offset)


def produce_then_fetch(records, value_format="auto"):
    p = parse_json_records(records)
    return render_json_records(stored(p.keys, p.values, p.headers, p.timestamps), value_format)


def test_to_consumer_batch():
    out = stored([b"a", b"b", b"c"], [None] * 3, base_offset=2**40)
    assert out.schema.equals(CONSUMER_SCHEMA)
    assert out.column(0).type == pa.int64()
    assert out.column(0).to_pylist() == [2**40, 2**40 + 1, 2**40 + 2]


def test_render_auto():
    keys = [b"plain", b"{not json", b"\xff\xfe", None, b'  {"a": 1}', b"", b"[1, 2]"]
    values = [b'{"x": [1, {"y": null}]}', b"[]", b"42", b"true", b"\x00ok", None, b"caf\xc3\xa9"]
    recs = render_json_records(stored(keys, values, timestamps=[7] * 7, base_offset=10))
    assert [r["offset"] for r in recs] == list(range(10, 17))
    assert all(r["timestamp"] == 7 and r["headers"] == {} for r in recs)
    assert recs[0]["key"] == "plain" and recs[0]["value"] == {"x": [1, {"y": None}]}
    assert recs[1]["key"] == "{not json" and recs[1]["value"] == []
    assert recs[2]["key_b64"] == B64(b"\xff\xfe").decode() and "key" not in recs[2]
    assert recs[2]["value"] == "42"  # numbers and booleans come back as their text
    assert recs[3]["key"] is None and recs[3]["value"] == "true"
    assert recs[4]["key"] == {"a": 1} and recs[4]["value"] == "\x00ok"
    assert recs[5]["key"] == "" and recs[5]["value"] is None
    assert recs[6]["key"] == [1, 2] and recs[6]["value"] == "café"
    assert list(recs[0]) == ["offset", "timestamp", "key", "value", "headers"]


def test_render_auto_all_valid_utf8_column_uses_same_rules():
    # No invalid UTF-8 in the column: the vectorized path must agree with the row path.
    keys = [b"a", b" [1]", b"{bad", None, b'\t{"k":"v"}\n']
    vectorized = render_json_records(stored(keys, [None] * 5))
    row_by_row = render_json_records(stored([*keys, b"\xff"], [None] * 6))[:5]
    assert vectorized == row_by_row
    assert [r["key"] for r in vectorized] == ["a", [1], "{bad", None, {"k": "v"}]


def test_render_base64():
    recs = render_json_records(stored([b"k", None], [b"\xff", b"{}"]), "base64")
    assert recs[0] == {
        "offset": 0,
        "timestamp": NOW,
        "key_b64": "aw==",
        "value_b64": "/w==",
        "headers": {},
    }
    assert recs[1]["key_b64"] is None and recs[1]["value_b64"] == "e30="


def test_render_string_replaces_invalid_utf8():
    recs = render_json_records(stored([b"ok", b"\xffa", None], [b'{"a":1}', b"x", b"y"]), "string")
    assert [r["key"] for r in recs] == ["ok", "\ufffda", None]
    assert recs[0]["value"] == '{"a":1}'  # string mode never parses JSON
    recs = render_json_records(stored([b"a"], [b"b"]), "string")
    assert recs[0]["key"] == "a" and recs[0]["value"] == "b"


def test_render_rejects_unknown_format():
    with pytest.raises(ValueError):
        render_json_records(stored([b"a"], [b"b"]), "hex")  # type: ignore[arg-type]


def test_render_headers():
    h_text = [{"key": "a", "value": b"1"}, {"key": "b", "value": None}]
    h_binary = [{"key": "a", "value": b"\xff"}]
    h_repeated = [{"key": "a", "value": b"1"}, {"key": "a", "value": b"2"}]
    batch = stored([b"k"] * 4, [b"v"] * 4, headers=[h_text, h_binary, h_repeated, None])
    auto = [r["headers"] for r in render_json_records(batch)]
    assert auto[0] == {"a": "1", "b": None}
    assert auto[1] == [{"key": "a", "value_b64": "/w=="}]
    assert auto[2] == [{"key": "a", "value_b64": "MQ=="}, {"key": "a", "value_b64": "Mg=="}]
    assert auto[3] == {}
    b64 = [r["headers"] for r in render_json_records(batch, "base64")]
    assert b64[0] == [{"key": "a", "value_b64": "MQ=="}, {"key": "b", "value_b64": None}]
    text = [r["headers"] for r in render_json_records(batch, "string")]
    assert text[1] == {"a": "\ufffd"}
    assert text[2] == [{"key": "a", "value": "1"}, {"key": "a", "value": "2"}]
    # Every rendered form is accepted back by JSON produce and stores the same headers.
    for rendered, original in zip(
        auto + b64, [h_text, h_binary, h_repeated, None] * 2, strict=True
    ):
        assert parse_json_records([{"headers": rendered}]).headers[0] == original


def test_arrow_produce_renders_like_json_produce():
    table = pa.table({"key": pa.array(["k1", None]), "value": pa.array(['{"a":1}', "text"])})
    norm = normalize_arrow(table, NOW)
    recs = render_json_records(to_consumer_batch(norm.batch, 5))
    expected = produce_then_fetch([{"key": "k1", "value": {"a": 1}}, {"value": "text"}])
    assert [r["offset"] for r in recs] == [5, 6]
    assert [r | {"offset": r["offset"] - 5} for r in recs] == expected


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
containers = st.one_of(
    st.lists(json_values, max_size=4), st.dictionaries(st.text(max_size=5), json_values, max_size=4)
)


def _reads_as_container(s: str) -> bool:
    if s.lstrip(" \t\n\r")[:1] not in ("{", "["):
        return False
    try:
        return isinstance(orjson.loads(s), (dict, list))
    except orjson.JSONDecodeError:
        return False


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.text(max_size=20), containers),
            st.one_of(st.none(), st.text(max_size=20), containers),
            st.dictionaries(
                st.text(max_size=5), st.one_of(st.none(), st.text(max_size=5)), max_size=3
            ),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_json_round_trip_strings_objects_arrays(rows):
    for k, v, _ in rows:
        for x in (k, v):
            if isinstance(x, str) and _reads_as_container(x):
                return  # such a string comes back as the JSON value it spells (documented)
    records = [{"key": k, "value": v, "headers": h} for k, v, h in rows]
    out = produce_then_fetch(records)
    for rec, got in zip(records, out, strict=True):
        assert got["key"] == rec["key"]
        assert got["value"] == rec["value"]
        assert got["headers"] == rec["headers"]


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=20)),
            st.one_of(st.none(), st.binary(max_size=20)),
        ),
        min_size=1,
        max_size=10,
    ),
    value_format=st.sampled_from(["auto", "base64"]),
)
def test_binary_round_trip_through_b64(rows, value_format):
    records = [
        {
            "key_b64": None if k is None else B64(k).decode(),
            "value_b64": None if v is None else B64(v).decode(),
        }
        for k, v in rows
    ]
    out = produce_then_fetch(records, value_format)
    for (k, v), got in zip(rows, out, strict=True):
        for raw, field in ((k, "key"), (v, "value")):
            if raw is None:
                assert got.get(field, got.get(field + "_b64", "missing")) is None
            elif field + "_b64" in got:
                assert base64.b64decode(got[field + "_b64"]) == raw
            else:  # auto: valid UTF-8 came back as text or as the JSON it spells
                assert value_format == "auto"
                text = raw.decode()
                rendered = got[field]
                assert rendered == text or (
                    isinstance(rendered, (dict, list)) and rendered == orjson.loads(raw)
                )
        # Feeding the rendered record back to produce stores the same bytes when it was b64.
        back = {f: got[f] for f in ("key_b64", "value_b64") if f in got}
        p = parse_json_records([back])
        if "key_b64" in got:
            assert p.keys[0] == k
        if "value_b64" in got:
            assert p.values[0] == v
