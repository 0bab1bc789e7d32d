"""AVRO: parsing and Parsing Canonical Form with Apache Avro's own Python library (`avro`),
and compatibility by its `avro.compatibility` checker, the port of Avro Java's
SchemaCompatibility that Confluent's registry (and Karapace) decide with: type promotions
int→long→float→double and string↔bytes, reader fields added with a default, enum symbols and
enum defaults, unions, named types and aliases.

References: each referenced schema (an Avro full name → its text) is parsed first into the
same set of names, so the schema may use the named types it imports; the registry passes them
dependencies first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import avro.errors
import avro.name
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from schemaformat.base import InvalidSchema, ParsedSchema

MAX_DEPTH = 64  # nested JSON levels: deeper would exhaust the parser's (recursive) stack


class AvroSchema:
    """A parsed Avro schema; `schema` is the library's object."""

    def __init__(self, schema: avro.schema.Schema, text: str) -> None:
        self.schema = schema
        self._text = text

    @property
    def schema_type(self) -> str:
        return "AVRO"

    def text(self) -> str:
        return self._text

    def normalized(self) -> str:
        # Parsing Canonical Form keeps what the binary encoding depends on (full names,
        # types, field order, symbols, sizes) and drops doc, aliases and defaults, so it is
        # not enough to tell two schemas apart; ours is the library's JSON with sorted keys
        # and no doc.
        return json.dumps(
            _without_doc(self.schema.to_json()), sort_keys=True, separators=(",", ":")
        )

    def canonical_form(self) -> str:
        """Avro's Parsing Canonical Form (the spec's fingerprint input)."""
        return str(self.schema.canonical_form)


def _without_doc(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_doc(v) for k, v in node.items() if k != "doc"}
    if isinstance(node, list):
        return [_without_doc(v) for v in node]
    return node


def _depth(node: Any) -> int:
    """Nesting depth of a JSON value, without recursion."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        value, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict | list):
            stack.extend((child, level + 1) for child in children)
    return deepest


def _load(text: str, what: str) -> Any:
    try:
        doc = json.loads(text)
    except RecursionError:
        raise InvalidSchema(f"{what} is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise InvalidSchema(f"{what} is not JSON: {exc}") from None
    if _depth(doc) > MAX_DEPTH:
        raise InvalidSchema(f"{what} is nested deeper than {MAX_DEPTH} levels")
    return doc


def _make(doc: Any, names: avro.name.Names, what: str) -> avro.schema.Schema:
    try:
        return avro.schema.make_avsc_object(doc, names)
    except (avro.errors.AvroException, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidSchema(f"{what} is not a valid Avro schema: {exc}") from None
    except RecursionError:
        raise InvalidSchema(f"{what} is nested too deeply") from None


class AvroKind:
    """The AVRO schema type."""

    @property
    def name(self) -> str:
        return "AVRO"

    def parse(self, text: str, references: Mapping[str, str]) -> AvroSchema:
        names = avro.name.Names()
        for ref_name, ref_text in references.items():
            _make(
                _load(ref_text, f"referenced schema {ref_name!r}"), names, f"reference {ref_name!r}"
            )
        doc = _load(text, "the schema")
        schema = _make(doc, names, "the schema")
        # The text as registered: compact JSON, as Confluent answers it.
        return AvroSchema(schema, json.dumps(doc, separators=(",", ":"), ensure_ascii=False))

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        if not isinstance(reader, AvroSchema) or not isinstance(writer, AvroSchema):
            return [f"cannot compare {reader.schema_type} with {writer.schema_type}"]
        try:
            checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
            result = checker.get_compatibility(reader.schema, writer.schema)
        except RecursionError:
            return ["the schemas are nested too deeply to compare"]
        if result.compatibility is SchemaCompatibilityType.compatible:
            return []
        # The library keeps locations and messages as sets, unpaired with the kinds: each
        # kind is reported with all of them.
        where = ", ".join(sorted(result.locations))
        what = ", ".join(sorted(result.messages))
        kinds = dict.fromkeys(str(getattr(k, "name", k)).upper() for k in result.incompatibilities)
        return [
            f"{{errorType:'{kind}', description:'the reader schema cannot read the writer's "
            f"data at {where}', additionalInfo:'{what}'}}"
            for kind in kinds
        ] or ["incompatible"]
