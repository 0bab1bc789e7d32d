"""Schemas → Arrow column types, and values (encoded by fastavro / protobuf / json) → one
typed struct column plus an error column, with evolution merged as Delta merges schemas."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from schemaformat.arrow_merge import TypeConflict, merge
from schemaformat.arrow_types import JSON_TEXT, TIMESTAMP
from schemaformat.base import ParsedSchema
from schemaformat.kinds import kinds
from schemaformat.typed_decode import ID_PREFIX, LATEST, TypedDecoder
from schemaformat.wire import frame

KINDS = kinds()
UTC = datetime.UTC

AVRO_V1 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "status", "type": {"type": "enum", "name": "S", "symbols": ["NEW", "DONE"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {
            "name": "ship",
            "type": {
                "type": "record",
                "name": "Ship",
                "fields": [{"name": "city", "type": "string"}],
            },
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "raw", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
        {"name": "ratio", "type": "float"},
        {"name": "either", "type": ["null", "int", "string"], "default": None},
    ],
}


class Lookup:
    def __init__(self, schemas: dict[int, ParsedSchema], latest: int | None = None) -> None:
        self.schemas, self.latest = schemas, latest

    def schema(self, schema_id: int) -> ParsedSchema:
        if schema_id not in self.schemas:
            raise LookupError("not registered")
        return self.schemas[schema_id]

    def latest_id(self) -> int | None:
        return self.latest


def avro(doc: dict[str, Any]) -> ParsedSchema:
    return KINDS["AVRO"].parse(json.dumps(doc), {})


def avro_bytes(doc: dict[str, Any], value: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(doc), value)
    return out.getvalue()


def decode(decoder: TypedDecoder, values: list[bytes | None], table: Any = None) -> Any:
    array = pa.array(values, pa.binary())
    plan = decoder.plan(table, decoder.schema_ids(array))
    return plan, decoder.decode(array, plan)


def test_avro_types_map_faithfully_and_values_round_trip() -> None:
    uid = uuid.uuid4()
    value = {
        "id": 7,
        "status": "DONE",
        "note": None,
        "tags": ["a", "b"],
        "attrs": {"x": 1},
        "ship": {"city": "Oslo"},
        "at": datetime.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=UTC),
        "at_us": datetime.datetime(2026, 1, 2, 3, 4, 5, 7, tzinfo=UTC),
        "day": datetime.date(2026, 1, 2),
        "price": decimal.Decimal("12.34"),
        "uid": uid,
        "raw": b"\x00\x01",
        "fx": b"abcd",
        "ratio": 0.5,
        "either": 3,
    }
    decoder = TypedDecoder(ID_PREFIX, Lookup({1: avro(AVRO_V1)}))
    plan, typed = decode(decoder, [frame(1, avro_bytes(AVRO_V1, value))])
    t = plan.struct
    assert t.field("id").type == pa.int64() and t.field("status").type == pa.string()
    assert t.field("tags").type == pa.list_(pa.field("element", pa.string()))
    assert t.field("attrs").type == pa.map_(pa.string(), pa.int64())
    assert t.field("ship").type == pa.struct([pa.field("city", pa.string())])
    assert t.field("at").type == TIMESTAMP and t.field("day").type == pa.date32()
    assert t.field("price").type == pa.decimal128(9, 2) and t.field("uid").type == pa.string()
    assert t.field("raw").type == pa.binary() and t.field("fx").type == pa.binary()
    assert t.field("either").metadata == JSON_TEXT
    assert all(f.nullable for f in t)
    row = typed.typed.to_pylist()[0]
    assert row == {
        **value,
        "attrs": [("x", 1)],
        "uid": str(uid),
        "either": "3",
    }
    assert typed.errors.to_pylist() == [None]


def test_bad_values_get_a_null_struct_and_a_reason_without_failing_the_batch() -> None:
    v1 = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"}]}
    good = frame(1, avro_bytes(v1, {"n": 5}))
    decoder = TypedDecoder(ID_PREFIX, Lookup({1: avro(v1)}))
    values = [good, b"plain text", frame(9, b"\x02"), good[:-1] + b"", frame(1, b"\x02\x00"), None]
    _, typed = decode(decoder, [*values, good])
    rows, errors = typed.typed.to_pylist(), typed.errors.to_pylist()
    assert rows[0] == {"n": 5} and rows[-1] == {"n": 5}
    assert rows[1:6] == [None] * 5
    assert "magic byte" in errors[1] and "schema id 9" in errors[2]
    assert "does not decode" in errors[3] and "follow the Avro value" in errors[4]
    assert errors[5] is None  # a tombstone is not an error
    assert typed.reasons == {"no_schema_id": 1, "unknown_schema": 1, "decode": 2}


def test_evolution_adds_nullable_fields_and_widens_int_to_long_in_place() -> None:
    v1 = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]}
    v2 = {**v1, "fields": [*v1["fields"], {"name": "s", "type": ["null", "string"]}]}
    nested = {"type": "record", "name": "N", "fields": [{"name": "x", "type": "long"}]}
    v3 = {
        **v2,
        "fields": [
            {"name": "n", "type": "long"},
            *v2["fields"][1:],
            {"name": "in", "type": nested},
        ],
    }
    decoder = TypedDecoder(ID_PREFIX, Lookup({1: avro(v1), 2: avro(v2), 3: avro(v3)}))
    first, _ = decode(decoder, [frame(1, avro_bytes(v1, {"n": 1}))])
    plan, typed = decode(
        decoder,
        [
            frame(1, avro_bytes(v1, {"n": 1})),
            frame(2, avro_bytes(v2, {"n": 2, "s": "b"})),
            frame(3, avro_bytes(v3, {"n": 2**40, "s": None, "in": {"x": 9}})),
        ],
        first.struct,
    )
    assert plan.struct.names == ["n", "s", "in"] and not plan.refused
    assert typed.typed.to_pylist() == [
        {"n": 1, "s": None, "in": None},
        {"n": 2, "s": "b", "in": None},
        {"n": 2**40, "s": None, "in": {"x": 9}},
    ]


def test_a_type_change_the_table_cannot_express_is_refused_with_its_reason() -> None:
    v1 = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"}]}
    v2 = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "string"}]}
    decoder = TypedDecoder(ID_PREFIX, Lookup({1: avro(v1), 2: avro(v2)}))
    plan, typed = decode(
        decoder, [frame(1, avro_bytes(v1, {"n": 1})), frame(2, avro_bytes(v2, {"n": "x"}))]
    )
    assert plan.struct == pa.struct([pa.field("n", pa.int64())])
    assert typed.typed.to_pylist() == [{"n": 1}, None]
    assert "n is string in this schema but int64 in the table" in typed.errors.to_pylist()[1]
    assert typed.reasons == {"type_conflict": 1}
    with pytest.raises(TypeConflict):
        merge(pa.struct([pa.field("a", pa.int64())]), pa.struct([pa.field("a", pa.float64())]))


PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Order {
  int32 id = 1;
  enum Status { NEW = 0; DONE = 1; }
  Status status = 2;
  repeated string tags = 3;
  map<string, int64> attrs = 4;
  message Ship { string city = 1; }
  Ship ship = 5;
  google.protobuf.Timestamp at = 6;
  bytes raw = 7;
  uint64 big = 8;
  google.protobuf.Int64Value maybe = 9;
  double ratio = 10;
}
"""


def test_protobuf_types_and_values_including_well_known_timestamp() -> None:
    schema = KINDS["PROTOBUF"].parse(PROTO, {})
    cls = getattr(schema, "message_class")([0])  # noqa: B009
    msg = cls(id=3, status=1, tags=["a"], raw=b"\x01", big=2**64 - 1, ratio=1.5)
    msg.attrs["k"] = 2**40
    msg.ship.city = "Rome"
    msg.at.seconds, msg.at.nanos = 1_700_000_000, 123_456_000
    decoder = TypedDecoder(ID_PREFIX, Lookup({4: schema}))
    plan, typed = decode(decoder, [frame(4, msg.SerializeToString(), [0])])
    t = plan.struct
    assert t.field("at").type == TIMESTAMP and t.field("big").type == pa.decimal128(20, 0)
    assert t.field("status").type == pa.string() and t.field("maybe").type == pa.int64()
    assert typed.typed.to_pylist() == [
        {
            "id": 3,
            "status": "DONE",
            "tags": ["a"],
            "attrs": [("k", 2**40)],
            "ship": {"city": "Rome"},
            "at": datetime.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC),
            "raw": b"\x01",
            "big": decimal.Decimal(2**64 - 1),
            "maybe": None,
            "ratio": 1.5,
        }
    ]


JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["string", "null"]},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "kind": {"enum": ["a", "b"]},
        "items": {"type": "array", "items": {"$ref": "#/definitions/Item"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "any": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    },
    "definitions": {"Item": {"type": "object", "properties": {"sku": {"type": "string"}}}},
}


def test_json_schema_values_parse_against_the_latest_schema() -> None:
    schema = KINDS["JSON"].parse(json.dumps(JSON_SCHEMA), {})
    decoder = TypedDecoder(LATEST, Lookup({5: schema}, latest=5))
    doc = {
        "id": 1,
        "name": None,
        "at": "2026-01-02T03:04:05.000006Z",
        "day": "2026-01-02",
        "kind": "a",
        "items": [{"sku": "x"}],
        "labels": {"k": "v"},
        "any": 4,
    }
    plan, typed = decode(decoder, [json.dumps(doc).encode(), b'{"id": "one"}', b"{"])
    assert plan.struct.field("items").type.value_type == pa.struct([pa.field("sku", pa.string())])
    assert typed.typed.to_pylist()[0] == {
        **doc,
        "at": datetime.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        "day": datetime.date(2026, 1, 2),
        "labels": [("k", "v")],
        "any": "4",
    }
    assert typed.typed.to_pylist()[1:] == [None, None]
    errors = typed.errors.to_pylist()
    assert "id: expected int64, got a string" in errors[1] and "not JSON" in errors[2]


def test_a_value_arrow_refuses_loses_only_its_own_typed_value() -> None:
    # An Avro decimal's bytes may hold more digits than its precision: Arrow refuses it.
    decimal_type = {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}
    doc = {"type": "record", "name": "R", "fields": [{"name": "d", "type": decimal_type}]}
    wide = {**doc, "fields": [{"name": "d", "type": {**decimal_type, "precision": 20}}]}
    ok = frame(1, avro_bytes(doc, {"d": decimal.Decimal("12.34")}))
    too_wide = frame(1, avro_bytes(wide, {"d": decimal.Decimal("123456789.12")}))
    decoder = TypedDecoder(ID_PREFIX, Lookup({1: avro(doc)}))
    _, typed = decode(decoder, [ok, too_wide, ok])
    assert typed.typed.to_pylist() == [
        {"d": decimal.Decimal("12.34")},
        None,
        {"d": decimal.Decimal("12.34")},
    ]
    errors = typed.errors.to_pylist()
    assert errors[0] is None and errors[2] is None
    assert "schema id 1: the value does not fit its column" in errors[1]
    assert typed.reasons == {"decode": 1}
