"""Protobuf compatibility decided as Confluent's registry decides it.

protobuf_compat_cases.json holds the writer/reader pairs of Confluent's own Protobuf diff
tests (protobuf-provider's diff-schema-examples.json, less the one that needs Confluent
Cloud's reserved-field metadata): the `.proto` texts, the referenced files they import,
whether the reader can read the writer's data, and the changes Confluent finds.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from schemaformat.base import InvalidSchema
from schemaformat.protobuf import KIND
from schemaformat.protobuf_diff import differences

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "protobuf_compat_cases.json").read_text()
)


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c['case']}" for i, c in enumerate(CASES)])
def test_confluent_case(case: dict[str, Any]) -> None:
    writer = KIND.parse(case["writer"], case["writer_references"])
    reader = KIND.parse(case["reader"], case["reader_references"])
    found = differences(writer, reader)
    assert Counter(f"{kind} {path}" for kind, path in found) == Counter(case["changes"])
    assert (KIND.incompatibilities(reader, writer) == []) is case["compatible"]


ORDER = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  string id = 1;
  google.protobuf.Timestamp placed = 2;
  map<string, int64> quantities = 3;
  message Line { string sku = 1; }
  repeated Line lines = 4;
}
"""


def test_the_python_serializers_base64_descriptor_is_the_same_schema_as_its_text() -> None:
    text = KIND.parse(ORDER, {})
    serialized = KIND.parse(text.serialized(), {})
    assert serialized.normalized() == text.normalized()
    assert serialized.text() == text.normalized()  # shown as .proto text, as Confluent does
    assert KIND.incompatibilities(serialized, text) == []


def test_normalized_text_compiles_to_the_same_descriptor() -> None:
    text = KIND.parse(ORDER, {})
    again = KIND.parse(text.normalized(), {})
    assert again.file == text.file


def test_message_indexes_name_nested_messages() -> None:
    schema = KIND.parse(ORDER, {})
    assert schema.message_class([0]).DESCRIPTOR.full_name == "shop.Order"
    assert schema.message_class([0, 0]).DESCRIPTOR.full_name == "shop.Order.Line"
    with pytest.raises(ValueError, match="message index 3"):
        schema.message_class([3])


@pytest.mark.parametrize(
    ("text", "references", "message"),
    [
        ('syntax = "proto3"; message A { int32 a = 1 }', {}, r'line 1, column \d+: Expected ";"'),
        ('syntax = "proto3"; import "b.proto"; message A {}', {}, "'b.proto' names no reference"),
        ('syntax = "proto3"; message A { B b = 1; }', {}, '"B" is not defined'),
        ('syntax = "proto3"; message A { int32 a = 1; int32 b = 1; }', {}, "has already been used"),
        (
            'syntax = "proto3"; import "b.proto"; message A { B b = 1; }',
            {"b.proto": "syntax = 'proto3'; message B { oops }"},
            "reference 'b.proto', line 1",
        ),
        ('syntax = "proto3"; import "../x.proto"; message A {}', {"../x.proto": ""}, "leaves"),
    ],
)
def test_invalid_protos_are_refused_with_protocs_reason(
    text: str, references: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidSchema, match=message):
        KIND.parse(text, references)


# The wire-compatible groups of protobuf's "Updating a message type" rules, which Confluent's
# scalar kinds follow: int32/uint32/int64/uint64/bool and enums; sint32/sint64;
# string/bytes; fixed32/sfixed32; fixed64/sfixed64; float; double.
SCALAR_CHANGES = [
    ("int32", "int64", True),
    ("uint64", "bool", True),
    ("int32", "sint32", False),
    ("sint32", "sint64", True),
    ("string", "bytes", True),
    ("fixed32", "sfixed32", True),
    ("fixed64", "sfixed64", True),
    ("fixed32", "fixed64", False),
    ("float", "double", False),
    ("int32", "float", False),
    ("Color", "int32", True),
    ("Color", "string", False),
    ("Inner", "string", False),
]


@pytest.mark.parametrize(("before", "after", "compatible"), SCALAR_CHANGES)
def test_field_type_changes_follow_the_wire_groups(
    before: str, after: str, compatible: bool
) -> None:
    def schema(kind: str) -> Any:
        text = (
            'syntax = "proto3"; package t; enum Color { RED = 0; }'
            f" message Inner {{ int32 x = 1; }} message M {{ {kind} f = 1; }}"
        )
        return KIND.parse(text, {})

    found = KIND.incompatibilities(schema(after), schema(before))
    assert (found == []) is compatible, found
