"""AVRO compatibility, table-driven: the expected outcomes are the published ones of
Confluent's AvroCompatibilityTest (schema1..schema8, as Karapace's
tests/unit/test_avro_compatibility.py restates them) and of Avro's TestSchemaCompatibility
(type promotions, enums, unions, fixed, names and aliases). Each row: reader, writer, whether
the reader reads the writer's data. Then levels: the registry's pairs per level."""

from __future__ import annotations

import json
from typing import Any

import pytest

from registry.levels import LEVELS, pairs
from schemaformat.avro import AvroKind
from schemaformat.base import InvalidSchema

KIND = AvroKind()


def rec(*fields: dict[str, Any], name: str = "myrecord", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


# Confluent's AvroCompatibilityTest schemas
S1 = rec({"type": "string", "name": "f1"})
S2 = rec({"type": "string", "name": "f1"}, {"type": "string", "name": "f2", "default": "foo"})
S3 = rec({"type": "string", "name": "f1"}, {"type": "string", "name": "f2"})
S4 = rec({"type": "string", "name": "f1_new", "aliases": ["f1"]})
S6 = rec({"type": ["null", "string"], "name": "f1", "doc": "doc of f1"})
S7 = rec({"type": ["null", "string", "int"], "name": "f1", "doc": "doc of f1"})
S8 = rec(
    {"type": "string", "name": "f1"},
    {"type": "string", "name": "f2", "default": "foo"},
    {"type": "string", "name": "f3", "default": "bar"},
)
ENUM_AB = {"type": "enum", "name": "Enum1", "symbols": ["A", "B"]}
ENUM_ABC = {"type": "enum", "name": "Enum1", "symbols": ["A", "B", "C"]}
ENUM2_AB = {"type": "enum", "name": "Enum2", "symbols": ["A", "B"]}
ENUM_AB_DEFAULT = {"type": "enum", "name": "Enum", "symbols": ["A", "B"], "default": "A"}
ENUM_ABC_DEFAULT = {"type": "enum", "name": "Enum", "symbols": ["A", "B", "C"], "default": "A"}
FIXED_4 = {"type": "fixed", "name": "Fixed", "size": 4}
FIXED_8 = {"type": "fixed", "name": "Fixed", "size": 8}
A_INT = rec({"name": "a", "type": "int"}, name="Record1")
A_LONG = rec({"name": "a", "type": "long"}, name="Record1")
A_DINT = rec({"name": "a", "type": "int", "default": 0}, name="Record1")
A_INT_B_INT = rec({"name": "a", "type": "int"}, {"name": "b", "type": "int"}, name="Record1")
A_INT_B_DINT = rec(
    {"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}, name="Record1"
)
EMPTY_1 = rec(name="Record1")
EMPTY_2 = rec(name="Record2")

CASES: list[tuple[str, Any, Any, bool]] = [
    # (why, reader, writer, compatible) -- Confluent's AvroCompatibilityTest
    ("field with default added: backward", S2, S1, True),
    ("field without default added: not backward", S3, S1, False),
    ("field renamed with an alias: backward", S4, S1, True),
    ("field type widened to a union: backward", S6, S1, True),
    ("a type removed from a union: not backward", S1, S6, False),
    ("a type added to a union: backward", S7, S6, True),
    ("a type removed from a union (2): not backward", S6, S7, False),
    ("fields with defaults added in steps: vs the first", S8, S1, True),
    ("fields with defaults added in steps: vs the second", S8, S2, True),
    ("default removed: compatible with the version before", S3, S2, True),
    ("added field read by the old schema: forward", S1, S2, True),
    ("added field without default read by the old: forward", S1, S3, True),
    ("fields removed with defaults: full, both ways", S1, S8, True),
    # Avro's TestSchemaCompatibility: promotions
    ("int read as long", "long", "int", True),
    ("int read as float", "float", "int", True),
    ("int read as double", "double", "int", True),
    ("long read as float", "float", "long", True),
    ("long read as double", "double", "long", True),
    ("float read as double", "double", "float", True),
    ("long read as int", "int", "long", False),
    ("double read as float", "float", "double", False),
    ("float read as long", "long", "float", False),
    ("string read as bytes", "bytes", "string", True),
    ("bytes read as string", "string", "bytes", True),
    ("int read as string", "string", "int", False),
    ("boolean read as int", "int", "boolean", False),
    ("null read as int", "int", "null", False),
    ("record field int read as long", A_LONG, A_INT, True),
    ("record field long read as int", A_INT, A_LONG, False),
    # arrays and maps
    (
        "array of int read as array of long",
        {"type": "array", "items": "long"},
        {"type": "array", "items": "int"},
        True,
    ),
    (
        "array of long read as array of int",
        {"type": "array", "items": "int"},
        {"type": "array", "items": "long"},
        False,
    ),
    (
        "map of int read as map of long",
        {"type": "map", "values": "long"},
        {"type": "map", "values": "int"},
        True,
    ),
    (
        "map read as array",
        {"type": "array", "items": "int"},
        {"type": "map", "values": "int"},
        False,
    ),
    # enums
    ("enum with more symbols reads fewer", ENUM_ABC, ENUM_AB, True),
    ("enum with fewer symbols cannot read more", ENUM_AB, ENUM_ABC, False),
    ("enum with a default reads unknown symbols", ENUM_AB_DEFAULT, ENUM_ABC_DEFAULT, True),
    ("enums of different names", ENUM2_AB, ENUM_AB, False),
    # fixed and names
    ("fixed of the same size", FIXED_4, FIXED_4, True),
    ("fixed of another size", FIXED_8, FIXED_4, False),
    ("records of different names", EMPTY_2, EMPTY_1, False),
    ("record alias names the writer", rec(name="Record2", aliases=["Record1"]), EMPTY_1, True),
    # record fields
    ("reader field with default missing in writer", A_DINT, EMPTY_1, True),
    ("reader field without default missing in writer", A_INT, EMPTY_1, False),
    ("writer field the reader ignores", A_INT, A_INT_B_INT, True),
    ("second reader field with default", A_INT_B_DINT, A_INT, True),
    ("second reader field without default", A_INT_B_INT, A_INT, False),
    # unions
    ("int read by a union holding long", ["null", "long"], "int", True),
    ("union read by a branch type: some branches unreadable", "int", ["int", "string"], False),
    ("union read by a wider union", ["int", "string", "null"], ["int", "string"], True),
    ("null read by a nullable union", ["null", "string"], "null", True),
]


@pytest.mark.parametrize(
    ("why", "reader", "writer", "compatible"), CASES, ids=[c[0] for c in CASES]
)
def test_reader_writer_compatibility(why: str, reader: Any, writer: Any, compatible: bool) -> None:
    r = KIND.parse(json.dumps(reader), {})
    w = KIND.parse(json.dumps(writer), {})
    messages = KIND.incompatibilities(r, w)
    assert (not messages) is compatible, (why, messages)


def test_incompatibility_names_its_kind() -> None:
    messages = KIND.incompatibilities(
        KIND.parse(json.dumps(S3), {}), KIND.parse(json.dumps(S1), {})
    )
    assert len(messages) == 1 and "READER_FIELD_MISSING_DEFAULT_VALUE" in messages[0]


@pytest.mark.parametrize(
    "text",
    [
        "{",
        '{"type": "record", "name": "r"}',  # no fields
        '{"type": "record", "name": "r", "fields": [{"name": "a", "type": "nope"}]}',
        '{"type": "enum", "name": "e", "symbols": ["A", "A"]}',
        '"unknown.Name"',
        '{"type":"array","items":' * 200 + '"int"' + "}" * 200,
    ],
)
def test_invalid_schemas_raise_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema):
        KIND.parse(text, {})


def test_normalized_ignores_spelling_and_doc_but_not_defaults() -> None:
    a = KIND.parse(json.dumps(rec({"name": "f", "type": {"type": "string"}})), {})
    b = KIND.parse(
        json.dumps(
            {
                "fields": [{"type": "string", "name": "f", "doc": "d"}],
                "name": "myrecord",
                "type": "record",
            }
        ),
        {},
    )
    c = KIND.parse(json.dumps(rec({"name": "f", "type": "string", "default": "x"})), {})
    assert a.normalized() == b.normalized() != c.normalized()
    assert (
        a.canonical_form()
        == '{"name":"myrecord","type":"record","fields":[{"name":"f","type":"string"}]}'
    )


def test_references_supply_named_types() -> None:
    address = json.dumps(
        rec({"name": "street", "type": "string"}, name="Address", namespace="acme")
    )
    person = json.dumps(rec({"name": "home", "type": "acme.Address"}, name="Person"))
    parsed = KIND.parse(person, {"acme.Address": address})
    assert '"name":"Address","namespace":"acme"' in parsed.normalized()  # expanded in place
    with pytest.raises(InvalidSchema):
        KIND.parse(person, {})


# Levels: which (reader, writer) pairs the registry asks a type about.
NEW = "new"


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("NONE", []),
        ("BACKWARD", [(NEW, "v3")]),
        ("FORWARD", [("v3", NEW)]),
        ("FULL", [(NEW, "v3"), ("v3", NEW)]),
        ("BACKWARD_TRANSITIVE", [(NEW, "v3"), (NEW, "v2"), (NEW, "v1")]),
        ("FORWARD_TRANSITIVE", [("v3", NEW), ("v2", NEW), ("v1", NEW)]),
        (
            "FULL_TRANSITIVE",
            [(NEW, "v3"), ("v3", NEW), (NEW, "v2"), ("v2", NEW), (NEW, "v1"), ("v1", NEW)],
        ),
    ],
)
def test_levels_become_pairs(level: str, expected: list[tuple[str, str]]) -> None:
    assert level in LEVELS
    assert pairs(level, NEW, ["v1", "v2", "v3"]) == expected
    assert pairs(level, NEW, []) == []


@pytest.mark.parametrize(
    ("level", "history", "new", "accepted"),
    [
        # Confluent's RestApiTest-style histories: S1 then S2 registered, then a third
        ("BACKWARD", [S1, S2], S3, True),  # S3 reads S2's data (f2 present)
        ("BACKWARD_TRANSITIVE", [S1, S2], S3, False),  # but not S1's
        ("FORWARD", [S1], S3, True),
        ("FORWARD_TRANSITIVE", [S3, S1], S2, True),
        ("FULL", [S1], S2, True),
        ("FULL", [S1], S3, False),
        ("FULL_TRANSITIVE", [S1, S2], S3, False),
        ("NONE", [S1], {"type": "enum", "name": "x", "symbols": ["A"]}, True),
    ],
)
def test_levels_over_a_history(level: str, history: list[Any], new: Any, accepted: bool) -> None:
    parsed_new = KIND.parse(json.dumps(new), {})
    olds = [KIND.parse(json.dumps(h), {}) for h in history]
    found = [
        m
        for reader, writer in pairs(level, parsed_new, olds)
        for m in KIND.incompatibilities(reader, writer)
    ]
    assert (not found) is accepted, found
