"""The values the typed lake tests (tests/integration/test_typed_lake.py) produce: one record
type through three schema versions in Avro, JSON Schema and Protobuf (a field added, then a
widened id and a nested record), serialized with confluent-kafka's serializers against the
broker's Schema Registry, and the typed values the table must hold for them."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from schemaformat.kinds import kinds
from tests.integration.typed_lake_env import Env


def value_ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


AVRO_SHIP = {
    "name": "ship",
    "type": [
        "null",
        {"type": "record", "name": "Ship", "fields": [{"name": "city", "type": "string"}]},
    ],
    "default": None,
}
AVRO_NOTE = {"name": "note", "type": ["null", "string"], "default": None}


def avro_schema(id_type: str, *extra: dict[str, Any]) -> str:
    fields = [{"name": "id", "type": id_type}, {"name": "item", "type": "string"}, *extra]
    return json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": fields})


AVRO_VERSIONS = [
    avro_schema("int"),
    avro_schema("int", AVRO_NOTE),
    avro_schema("long", AVRO_NOTE, AVRO_SHIP),
]
PRODUCED = [
    {"id": 1, "item": "a"},
    {"id": 2, "item": "b", "note": "n2"},
    {"id": 2**40, "item": "c", "note": None, "ship": {"city": "Oslo"}},
]
EXPECTED = [
    {"id": 1, "item": "a", "note": None, "ship": None},
    {"id": 2, "item": "b", "note": "n2", "ship": None},
    {"id": 2**40, "item": "c", "note": None, "ship": {"city": "Oslo"}},
]


JSON_V1 = {"type": "object", "properties": {"id": {"type": "integer"}, "item": {"type": "string"}}}
JSON_VERSIONS = [
    JSON_V1,
    {**JSON_V1, "properties": {**JSON_V1["properties"], "note": {"type": "string"}}},
    {
        **JSON_V1,
        "properties": {
            **JSON_V1["properties"],
            "note": {"type": "string"},
            "ship": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
]


def json_values(env: Env, topic: str) -> list[bytes | None]:
    env.registry.set_compatibility(f"{topic}-value", "NONE")  # open content models
    produced = [
        {"id": 1, "item": "a"},
        {"id": 2, "item": "b", "note": "n2"},
        {"id": 2**40, "item": "c", "ship": {"city": "Oslo"}},
    ]
    return [
        JSONSerializer(json.dumps(schema), env.registry)(record, value_ctx(topic))
        for schema, record in zip(JSON_VERSIONS, produced, strict=True)
    ]


PROTO_VERSIONS = [
    'syntax = "proto3"; package shop; message Order { int32 id = 1; string item = 2; }',
    'syntax = "proto3"; package shop;'
    " message Order { int32 id = 1; string item = 2; string note = 3; }",
    'syntax = "proto3"; package shop;'
    " message Order { int64 id = 1; string item = 2; string note = 3; Ship ship = 4; }"
    " message Ship { string city = 1; }",
]
# proto3 strings without presence hold "" when unset: that is what was produced
PROTO_EXPECTED = [*EXPECTED[:2], {**EXPECTED[2], "note": ""}]


def proto_values(env: Env, topic: str) -> list[bytes | None]:
    values: list[bytes | None] = []
    for text, record in zip(PROTO_VERSIONS, PRODUCED, strict=True):
        values.append(proto_value(env, topic, text, record))
    return values


def proto_value(env: Env, topic: str, text: str, record: dict[str, Any]) -> bytes:
    cls = getattr(kinds()["PROTOBUF"].parse(text, {}), "message_class")([0])  # noqa: B009
    message = cls(**{k: v for k, v in record.items() if k in ("id", "item")})
    if record.get("note"):
        message.note = record["note"]
    if record.get("ship"):
        message.ship.city = record["ship"]["city"]
    serialize = ProtobufSerializer(cls, env.registry, {"use.deprecated.format": False})
    return bytes(serialize(message, value_ctx(topic)))


# Per format: its topic, its three versions' values, the typed values expected, and a
# poisoned value (v1's schema id, then a body v1 does not describe) with its error.
FORMATS = {
    "json": ("typed-json", json_values, EXPECTED, lambda v1: v1[:5] + b"{oops", "not JSON"),
    "protobuf": (
        "typed-proto",
        proto_values,
        PROTO_EXPECTED,
        lambda v1: v1[:6] + b"\x0a\xff",  # the index [0], then a field longer than the body
        "does not decode",
    ),
}
