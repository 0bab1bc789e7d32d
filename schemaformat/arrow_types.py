"""The Arrow type of a schema's values, as a Delta table can hold it (docs/lake-tables.md).

Every schema maps to one struct (a top-level value that is not a record becomes the struct's
one field `value`); every field is nullable, so a later schema version that adds a field adds
a nullable column, and older rows read it as null. Delta has no unsigned, 32-bit-only or time
types, which decides a few mappings:

- integers of every width are int64 (so Avro's int→long and Protobuf's int32→int64 are no
  schema change); uint64 is decimal(20, 0); float is float64 (float→double likewise)
- enums are strings; uuid is a string; bytes and fixed are binary; decimal(p, s) is decimal
- Avro timestamp-millis/micros and Protobuf's google.protobuf.Timestamp are timestamps in UTC
  (Delta's are microseconds); local-timestamp-* are timestamps without a zone; date is date;
  time-millis/micros are int64 microseconds of the day
- what a column cannot type (Avro unions of several non-null types, JSON Schema's oneOf /
  anyOf / untyped nodes, google.protobuf.Struct/Value/Any) is a string holding the value as
  JSON, marked with JSON_TEXT in its field's metadata
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import avro.schema
import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor

JSON_TEXT = {b"tierlog.json": b"1"}  # field metadata: the column holds the value as JSON text
TIMESTAMP = pa.timestamp("us", tz="UTC")
LOCAL_TIMESTAMP = pa.timestamp("us")
UINT64 = pa.decimal128(20, 0)
MAX_DEPTH = 32  # a recursive schema cannot be a column: refuse it rather than recurse


class UnsupportedSchema(ValueError):
    """The schema's values cannot be a column of the table (the message says why)."""


def field(name: str, type_: pa.DataType, metadata: Mapping[bytes, bytes] | None = None) -> pa.Field:
    return pa.field(name, type_, nullable=True, metadata=metadata)


def json_text(name: str) -> pa.Field:
    return field(name, pa.string(), JSON_TEXT)


def as_struct(top: pa.Field) -> pa.StructType:
    """The struct of a top-level value: a record's own, else one field `value`."""
    if pa.types.is_struct(top.type) and not top.metadata:
        return top.type
    return pa.struct([top.with_name("value")])


# -- Avro -------------------------------------------------------------------------------------

_AVRO_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int": pa.int64(),
    "long": pa.int64(),
    "float": pa.float64(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_AVRO_LOGICAL = {
    "timestamp-millis": TIMESTAMP,
    "timestamp-micros": TIMESTAMP,
    "local-timestamp-millis": LOCAL_TIMESTAMP,
    "local-timestamp-micros": LOCAL_TIMESTAMP,
    "date": pa.date32(),
    "time-millis": pa.int64(),
    "time-micros": pa.int64(),
    "uuid": pa.string(),
}


def avro_struct(schema: avro.schema.Schema) -> pa.StructType:
    return as_struct(_avro_field("value", schema, 0))


def _avro_field(name: str, schema: avro.schema.Schema, depth: int) -> pa.Field:
    if depth > MAX_DEPTH:
        raise UnsupportedSchema(f"{name}: the schema nests deeper than {MAX_DEPTH} (recursive?)")
    logical = schema.other_props.get("logicalType") if hasattr(schema, "other_props") else None
    if isinstance(schema, avro.schema.RecordSchema):
        return field(
            name, pa.struct([_avro_field(f.name, f.type, depth + 1) for f in schema.fields])
        )
    if isinstance(schema, avro.schema.UnionSchema):
        branches = [s for s in schema.schemas if s.type != "null"]
        if len(branches) == 1:
            return _avro_field(name, branches[0], depth)
        return json_text(name)
    if isinstance(schema, avro.schema.ArraySchema):
        return field(name, pa.list_(_avro_field("element", schema.items, depth + 1)))
    if isinstance(schema, avro.schema.MapSchema):
        value = _avro_field("value", schema.values, depth + 1)
        return field(name, pa.map_(pa.string(), value))
    if isinstance(schema, avro.schema.EnumSchema):
        return field(name, pa.string())
    return _avro_leaf(name, schema, logical)


def _avro_leaf(name: str, schema: avro.schema.Schema, logical: object) -> pa.Field:
    if schema.type in ("bytes", "fixed") and logical == "decimal":
        precision = int(str(schema.get_prop("precision")))
        scale = int(str(schema.get_prop("scale") or 0))
        if precision > 38:
            raise UnsupportedSchema(f"{name}: decimal({precision}, {scale}) exceeds 38 digits")
        return field(name, pa.decimal128(precision, scale))
    if schema.type == "fixed":
        return field(name, pa.binary())
    if isinstance(logical, str) and logical in _AVRO_LOGICAL:
        return field(name, _AVRO_LOGICAL[logical])
    if schema.type in _AVRO_PRIMITIVES:
        return field(name, _AVRO_PRIMITIVES[schema.type])
    raise UnsupportedSchema(f"{name}: Avro type {schema.type!r} has no column type")


# -- Protobuf ---------------------------------------------------------------------------------

_PROTO_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_FLOAT: pa.float64(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_UINT64: UINT64,
    FieldDescriptor.TYPE_FIXED64: UINT64,
    FieldDescriptor.TYPE_INT32: pa.int64(),
    FieldDescriptor.TYPE_SINT32: pa.int64(),
    FieldDescriptor.TYPE_SFIXED32: pa.int64(),
    FieldDescriptor.TYPE_UINT32: pa.int64(),
    FieldDescriptor.TYPE_FIXED32: pa.int64(),
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
    FieldDescriptor.TYPE_ENUM: pa.string(),
}
# Well-known messages with a column type of their own (wrappers are their nullable scalar).
PROTO_TIMESTAMP = "google.protobuf.Timestamp"
PROTO_JSON = frozenset({"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.Any"})
PROTO_WRAPPERS = {
    f"google.protobuf.{n}Value": t
    for n, t in [
        ("Double", pa.float64()),
        ("Float", pa.float64()),
        ("Int64", pa.int64()),
        ("UInt64", UINT64),
        ("Int32", pa.int64()),
        ("UInt32", pa.int64()),
        ("Bool", pa.bool_()),
        ("String", pa.string()),
        ("Bytes", pa.binary()),
    ]
}


def protobuf_struct(message: Descriptor) -> pa.StructType:
    return pa.struct([_proto_field(f, 0) for f in message.fields])


def is_map(fd: FieldDescriptor) -> bool:
    return fd.message_type is not None and fd.message_type.GetOptions().map_entry


def is_repeated(fd: FieldDescriptor) -> bool:
    return bool(fd.is_repeated)


def _proto_field(fd: FieldDescriptor, depth: int) -> pa.Field:
    if depth > MAX_DEPTH:
        raise UnsupportedSchema(
            f"{fd.name}: the message nests deeper than {MAX_DEPTH} (recursive?)"
        )
    if is_map(fd):
        key, value = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
        return field(fd.name, pa.map_(_PROTO_SCALARS[key.type], _proto_single(value, depth + 1)))
    single = _proto_single(fd, depth)
    if is_repeated(fd):
        return field(fd.name, pa.list_(single.with_name("element")))
    return single


def _proto_single(fd: FieldDescriptor, depth: int) -> pa.Field:
    if fd.type != FieldDescriptor.TYPE_MESSAGE and fd.type != FieldDescriptor.TYPE_GROUP:
        return field(fd.name, _PROTO_SCALARS[fd.type])
    full = fd.message_type.full_name
    if full == PROTO_TIMESTAMP:
        return field(fd.name, TIMESTAMP)
    if full in PROTO_WRAPPERS:
        return field(fd.name, PROTO_WRAPPERS[full])
    if full in PROTO_JSON:
        return json_text(fd.name)
    return field(fd.name, pa.struct([_proto_field(f, depth + 1) for f in fd.message_type.fields]))


# -- JSON Schema ------------------------------------------------------------------------------

_JSON_SCALARS = {
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
}
_JSON_FORMATS = {"date-time": TIMESTAMP, "date": pa.date32()}


def json_struct(document: Any, documents: Mapping[str, Any]) -> pa.StructType:
    return as_struct(_JsonTypes(document, documents).field("value", document, 0))


class _JsonTypes:
    def __init__(self, root: Any, documents: Mapping[str, Any]) -> None:
        self.root, self.documents = root, documents

    def resolve(self, node: Any, depth: int) -> Any:
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            if depth > MAX_DEPTH:
                raise UnsupportedSchema(f"$ref chains deeper than {MAX_DEPTH} (recursive?)")
            node, depth = self._target(node["$ref"]), depth + 1
        return node

    def _target(self, ref: str) -> Any:
        where, _, pointer = ref.partition("#")
        doc = self.documents.get(where, self.root) if where else self.root
        for part in [p for p in pointer.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(doc, dict) or part not in doc:
                raise UnsupportedSchema(f"$ref {ref!r} names nothing in the schema")
            doc = doc[part]
        return doc

    def field(self, name: str, node: Any, depth: int) -> pa.Field:
        if depth > MAX_DEPTH:
            raise UnsupportedSchema(f"{name}: the schema nests deeper than {MAX_DEPTH}")
        node = self.resolve(node, depth)
        if not isinstance(node, dict):
            return json_text(name)  # true/false schemas: anything, or nothing
        if "enum" in node and all(isinstance(v, str) for v in node["enum"]):
            return field(name, pa.string())
        kind = node.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            kind = kinds[0] if len(kinds) == 1 else None
        if kind == "object":
            return self._object(name, node, depth)
        if kind == "array" and isinstance(node.get("items"), dict | bool):
            return field(name, pa.list_(self.field("element", node["items"], depth + 1)))
        if kind == "string" and node.get("format") in _JSON_FORMATS:
            return field(name, _JSON_FORMATS[node["format"]])
        if isinstance(kind, str) and kind in _JSON_SCALARS:
            return field(name, _JSON_SCALARS[kind])
        return json_text(name)

    def _object(self, name: str, node: dict[str, Any], depth: int) -> pa.Field:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if not properties and isinstance(extra, dict):
            return field(name, pa.map_(pa.string(), self.field("value", extra, depth + 1)))
        if not isinstance(properties, dict):
            return json_text(name)
        return field(name, pa.struct([self.field(k, v, depth + 1) for k, v in properties.items()]))
