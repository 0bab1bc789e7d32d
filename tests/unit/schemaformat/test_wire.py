"""Confluent's wire format: framing, Protobuf message indexes, and values decoded to JSON
with the writer's schema, each bad value refused with a reason."""

from __future__ import annotations

import datetime
import io
import json
from typing import Any

import avro.io
import pytest

from schemaformat import wire
from schemaformat.kinds import kinds

KINDS = kinds()
AVRO = KINDS["AVRO"].parse(
    '{"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"},'
    ' {"name": "n", "type": "long"}, {"name": "b", "type": "bytes"},'
    ' {"name": "d", "type": {"type": "int", "logicalType": "date"}}]}',
    {},
)
PROTO = KINDS["PROTOBUF"].parse(
    'syntax = "proto3"; package p; message A { string s = 1; }'
    " message B { int64 n = 1; map<string, int32> m = 2; message C { bool ok = 1; } }",
    {},
)


def _avro_payload(value: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    avro.io.DatumWriter(AVRO.schema).write(value, avro.io.BinaryEncoder(out))
    return out.getvalue()


@pytest.mark.parametrize(
    ("indexes", "encoded"),
    [([0], b"\x00"), ([1], b"\x02\x02"), ([1, 0], b"\x04\x02\x00"), ([0, 70], b"\x04\x00\x8c\x01")],
)
def test_message_indexes_round_trip_in_confluents_encoding(
    indexes: list[int], encoded: bytes
) -> None:
    assert wire.encode_indexes(indexes) == encoded
    assert wire.decode_indexes(encoded + b"rest") == (indexes, b"rest")


def test_a_framed_value_splits_into_id_and_body() -> None:
    framed = wire.unframe(wire.frame(258, b"body"))
    assert (framed.schema_id, framed.body) == (258, b"body")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"", "empty"),
        (b'{"a": 1}', "not Confluent's magic byte 0"),
        (b"\x00\x00\x01", "too short for a schema id"),
    ],
)
def test_values_not_in_the_wire_format_are_refused(value: bytes, message: str) -> None:
    with pytest.raises(wire.WireFormatError, match=message):
        wire.unframe(value)


def test_avro_decodes_to_json_with_logical_types_shown() -> None:
    payload = _avro_payload({"s": "hé", "n": 42, "b": b"\x01\x02", "d": datetime.date(2022, 1, 8)})
    decoded = wire.decode(AVRO, payload)
    assert decoded.value == {"s": "hé", "n": 42, "b": "AQI=", "d": "2022-01-08"}
    json.dumps(decoded.value)


@pytest.mark.parametrize(("cut", "message"), [(-1, "truncated"), (1, "truncated")])
def test_a_truncated_avro_payload_is_refused(cut: int, message: str) -> None:
    payload = _avro_payload({"s": "hello", "n": 1, "b": b"xy", "d": datetime.date(1970, 1, 2)})
    with pytest.raises(wire.WireFormatError, match=message):
        wire.decode(AVRO, payload[:cut])


def test_bytes_after_an_avro_value_are_refused() -> None:
    payload = _avro_payload({"s": "", "n": 1, "b": b"", "d": datetime.date(1970, 1, 2)})
    with pytest.raises(wire.WireFormatError, match="1 bytes follow"):
        wire.decode(AVRO, payload + b"!")


def test_protobuf_decodes_the_message_its_indexes_name() -> None:
    message = PROTO.message_class([1])(n=7)
    message.m["k"] = 3
    decoded = wire.decode(PROTO, wire.encode_indexes([1]) + message.SerializeToString())
    assert decoded == wire.Decoded({"n": "7", "m": {"k": 3}}, "p.B")
    nested = PROTO.message_class([1, 0])(ok=True).SerializeToString()
    assert wire.decode(PROTO, wire.encode_indexes([1, 0]) + nested).message == "p.B.C"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x02\x08", "name no message"),  # [4]: the file has two messages
        (b"\x02", "ends inside its Protobuf message indexes"),
        (b"\x00\x0a\x05ab", "does not decode"),  # a string field cut short
    ],
)
def test_bad_protobuf_values_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(wire.WireFormatError, match=message):
        wire.decode(PROTO, body)


def test_json_values_decode_and_bad_ones_are_refused() -> None:
    schema = KINDS["JSON"].parse('{"type": "object"}', {})
    assert wire.decode(schema, b'{"a": [1, 2]}').value == {"a": [1, 2]}
    with pytest.raises(wire.WireFormatError, match="not JSON"):
        wire.decode(schema, b'{"a": ')


def test_prefix_ids_names_the_id_of_framed_values_only() -> None:
    import pyarrow as pa

    values = [
        wire.frame(7, b"x"),
        None,
        b"\x00\x00\x00",
        b"\x01\x00\x00\x00\x07",
        wire.frame(2**31, b""),
    ]
    for array in (pa.array(values, pa.binary()), pa.array(values, pa.large_binary())):
        assert wire.prefix_ids(array).tolist() == [7, -1, -1, -1, 2**31]
        assert wire.prefix_ids(array.slice(3)).tolist() == [-1, 2**31]
    assert wire.prefix_ids(pa.array([None, b""], pa.binary())).tolist() == [-1, -1]
