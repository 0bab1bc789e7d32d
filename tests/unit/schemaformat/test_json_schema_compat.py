"""JSON Schema compatibility decided as Confluent's registry decides it.

json_schema_compat_cases.json holds the writer/reader pairs of Confluent's own JSON Schema
diff tests (json-schema-provider's diff-schema-examples*.json and
diff-combined-schema-examples*.json, drafts 7 and 2020-12): for each, whether the reader can
read the writer's data and the changes Confluent finds, with their JSON paths. In five
compatible 2020-12 cases Confluent's 2020-12 loader drops a keyword before comparing (an
`$id`, a removed bound) and reports no change where we report the compatible one; those are
marked and checked for the verdict only.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from schemaformat.base import InvalidSchema
from schemaformat.jsonschema import KIND
from schemaformat.jsonschema_diff import differences

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "json_schema_compat_cases.json").read_text()
)


def _parse(schema: Any) -> Any:
    return KIND.parse(json.dumps(schema), {})


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c['case']}" for i, c in enumerate(CASES)])
def test_confluent_case(case: dict[str, Any]) -> None:
    writer, reader = _parse(case["writer"]), _parse(case["reader"])
    found = differences(writer.root(), reader.root())
    if not case.get("changes_reported_by_confluent_are_fewer"):
        assert Counter(f"{kind} {path}" for kind, path in found) == Counter(case["changes"])
    assert (KIND.incompatibilities(reader, writer) == []) is case["compatible"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ("[1]", "must be a JSON object or a boolean"),
        ('{"type": 5}', "not a valid JSON Schema"),
        ('{"type": "integr"}', "not a valid JSON Schema"),
        ('{"$ref": "#/definitions/missing"}', "points at nothing"),
        ('{"$ref": "other.json"}', "names no schema among the references"),
        ('{"$schema": "http://example.com/my-draft"}', "not a JSON Schema draft"),
        ('{"not":' * 100 + "{}" + "}" * 100, "nested deeper"),
        ('{"items":' * 80 + "{}" + "}" * 80, "nested deeper"),
    ],
)
def test_invalid_schemas_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(InvalidSchema, match=message):
        KIND.parse(text, {})


def test_a_reference_resolves_by_its_name_and_takes_part_in_compatibility() -> None:
    customer = '{"type": "object", "properties": {"name": {"type": "string"}}}'
    widened = '{"type": "object", "properties": {"name": {"type": ["string", "null"]}}}'
    order = '{"type": "object", "properties": {"customer": {"$ref": "customer.json"}}}'
    writer = KIND.parse(order, {"customer.json": customer})
    reader = KIND.parse(order, {"customer.json": widened})
    assert KIND.incompatibilities(reader, writer) == []
    assert KIND.incompatibilities(writer, reader) == [
        "Found incompatible change: Difference{jsonPath='#/properties/customer/properties/name',"
        " type=TYPE_CHANGED}"
    ]


def test_recursive_schemas_compare_without_end() -> None:
    tree = {
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#"}}},
    }
    assert KIND.incompatibilities(_parse(tree), _parse(tree)) == []


def test_normalized_form_ignores_key_order_and_whitespace() -> None:
    one = KIND.parse('{"type": "string", "maxLength": 3}', {})
    other = KIND.parse('{ "maxLength":3,"type":"string" }', {})
    assert one.normalized() == other.normalized()
    assert one.text() != other.text()


def _nested_unions(depth: int, leaf: str, tag: str = "") -> dict[str, Any]:
    if depth == 0:
        return {"type": leaf, "title": tag}
    members = [
        {"type": "object", "properties": {f"p{i}": _nested_unions(depth - 1, leaf, f"{tag}{i}")}}
        for i in range(6)
    ]
    return {"oneOf": members}


def test_a_pair_too_costly_to_compare_is_refused_not_computed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("schemaformat.jsonschema_diff.MAX_COMPARISONS", 200)
    writer, reader = _parse(_nested_unions(3, "string")), _parse(_nested_unions(3, "integer"))
    assert KIND.incompatibilities(reader, writer) == [
        "the schemas are too complex to compare (200 subschema pairs)"
    ]


def test_a_type_list_beside_an_anyof_is_two_unions_not_one() -> None:
    both = {"type": ["string", "integer"], "anyOf": [{"minLength": 1}, {"minimum": 0}]}
    only_types = {"type": ["string", "integer"], "anyOf": [{"minLength": 1}, {"minimum": 1}]}
    assert KIND.incompatibilities(_parse(both), _parse(both)) == []
    assert KIND.incompatibilities(_parse(only_types), _parse(both)) != []
