"""Confluent's wire format and the decoding of schema'd values to JSON.

A value written by a Confluent serializer is: the magic byte 0, the schema's id as a 4-byte
big-endian integer, then (Protobuf only) the message indexes naming which message of the
`.proto` it is, then the encoded value (Avro binary, Protobuf, or UTF-8 JSON for JSON
Schema). The indexes are a zigzag varint count and that many zigzag varints, except that the
common [0] (the file's first message) is the single byte 0.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from schemaformat.base import ParsedSchema

MAGIC = 0
HEADER = 5  # magic byte + 4-byte id
MAX_INDEXES = 64  # message nesting deeper than this is not a schema anyone wrote


class WireFormatError(ValueError):
    """The value is not in Confluent's wire format, or not what its schema describes."""


@dataclass(frozen=True)
class Framed:
    """A value split into its schema id and what follows the id."""

    schema_id: int
    body: bytes


def prefix_ids(values: pa.Array) -> np.ndarray:
    """The schema id each value's prefix names, -1 where a value is null, shorter than the
    prefix or not starting with the magic byte (no value is decoded)."""
    ids = np.full(len(values), -1, dtype=np.int64)
    _, offsets, data = values.buffers()
    if data is None or not len(values):
        return ids
    width = np.int64 if pa.types.is_large_binary(values.type) else np.int32
    window = slice(values.offset, values.offset + len(values) + 1)
    bounds = np.frombuffer(offsets, width)[window].astype(np.int64)
    starts = bounds[:-1]
    framed = bounds[1:] - starts >= HEADER
    if values.null_count:
        framed &= np.asarray(values.is_valid().to_numpy(zero_copy_only=False))
    raw = np.frombuffer(data, np.uint8)
    # Every byte offset of the buffer as the start of a big-endian id: one gather reads all.
    be32 = np.ndarray((max(0, len(raw) - 3),), ">u4", raw, strides=(1,))
    if framed.all():  # the common case: every value long enough for a prefix
        magic = raw[starts] == MAGIC
        if magic.all():
            return be32[starts + 1].astype(np.int64)
        where = np.flatnonzero(magic)
    else:
        where = np.flatnonzero(framed)
        where = where[raw[starts[where]] == MAGIC]
    ids[where] = be32[starts[where] + 1]
    return ids


def unframe(value: bytes) -> Framed:
    if not value:
        raise WireFormatError("the value is empty, not a schema'd value")
    if value[0] != MAGIC:
        raise WireFormatError(
            f"the value starts with byte {value[0]}, not Confluent's magic byte 0: "
            "it was not written by a schema registry serializer"
        )
    if len(value) < HEADER:
        raise WireFormatError(f"the value is {len(value)} bytes, too short for a schema id")
    return Framed(int.from_bytes(value[1:HEADER], "big"), value[HEADER:])


def frame(schema_id: int, payload: bytes, indexes: list[int] | None = None) -> bytes:
    """The inverse of unframe (message indexes for Protobuf values)."""
    head = bytes([MAGIC]) + schema_id.to_bytes(4, "big")
    return head + (encode_indexes(indexes) if indexes is not None else b"") + payload


def _zigzag_varint(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    return b"".join(_zigzag_varint(v) for v in [len(indexes), *indexes])


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    shift, result = 0, 0
    while True:
        if at >= len(data):
            raise WireFormatError("the value ends inside its Protobuf message indexes")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
        if shift > 63:
            raise WireFormatError("a Protobuf message index is not a valid varint")


def decode_indexes(body: bytes) -> tuple[list[int], bytes]:
    """(message indexes, the Protobuf payload after them)."""
    count, at = _read_varint(body, 0)
    if count == 0:
        return [0], body[at:]
    if count < 0 or count > MAX_INDEXES:
        raise WireFormatError(f"{count} Protobuf message indexes: not a schema'd value")
    indexes = []
    for _ in range(count):
        index, at = _read_varint(body, at)
        if index < 0:
            raise WireFormatError(f"negative Protobuf message index {index}")
        indexes.append(index)
    return indexes, body[at:]


def jsonable(value: Any) -> Any:
    """A decoded value as JSON can show it: bytes as base64 (Protobuf's JSON mapping does
    the same), decimals as strings (no precision lost), dates and times in ISO 8601."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return value


@dataclass(frozen=True)
class Decoded:
    """A value decoded with its writer's schema: the JSON-able value and, for Protobuf,
    the message type it is."""

    value: Any
    message: str | None = None


def decode(schema: ParsedSchema, body: bytes) -> Decoded:
    """Decodes what follows the schema id, with the schema the id names."""
    if schema.schema_type == "AVRO":
        return Decoded(_decode_avro(schema, body))
    if schema.schema_type == "JSON":
        return Decoded(_decode_json(body))
    if schema.schema_type == "PROTOBUF":
        return _decode_protobuf(schema, body)
    raise WireFormatError(f"no decoder for schema type {schema.schema_type}")


def _decode_avro(schema: ParsedSchema, body: bytes) -> Any:
    import avro.errors
    import avro.io

    source = io.BytesIO(body)
    reader = avro.io.DatumReader(getattr(schema, "schema"))  # noqa: B009 (AvroSchema's own)
    try:
        value = reader.read(avro.io.BinaryDecoder(source))
    except (avro.errors.AvroException, ValueError, TypeError, IndexError, EOFError) as error:
        message = f"the Avro payload does not decode with its schema (truncated?): {error}"
        raise WireFormatError(message) from None
    if source.tell() < len(body):  # the schema is not the one the value was written with
        raise WireFormatError(f"{len(body) - source.tell()} bytes follow the Avro value")
    return jsonable(value)


def _decode_json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise WireFormatError(f"the JSON payload is not JSON: {error}") from None


def _decode_protobuf(schema: ParsedSchema, body: bytes) -> Decoded:
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError

    indexes, payload = decode_indexes(body)
    try:
        message_class = getattr(schema, "message_class")(indexes)  # noqa: B009
    except (ValueError, KeyError) as error:
        raise WireFormatError(f"the message indexes {indexes} name no message: {error}") from None
    message = message_class()
    try:
        message.ParseFromString(payload)
    except DecodeError as error:
        raise WireFormatError(f"the Protobuf payload does not decode: {error}") from None
    value = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return Decoded(value, message.DESCRIPTOR.full_name)
