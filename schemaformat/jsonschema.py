"""JSON (JSON Schema): parsing, with the schema checked against its draft's meta-schema by the
`jsonschema` library (drafts 4, 6, 7, 2019-09 and 2020-12, named by `$schema`; draft 7
without one, as Confluent's serializers assume), `$ref`s resolved within the schema and to
its references (a reference's name is the URL the `$ref` uses), a normalized form (sorted
keys, no whitespace), and Confluent's compatibility rules (jsonschema_diff.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from schemaformat import jsonschema_diff
from schemaformat.base import InvalidSchema, ParsedSchema
from schemaformat.jsonschema_model import Loader, Node, canonical
from schemaformat.jsonschema_rules import COMPATIBLE

MAX_DEPTH = 64  # nested JSON levels: deeper would exhaust recursive parsers and checkers

VALIDATORS: dict[str, type[Any]] = {
    "4": jsonschema.Draft4Validator,
    "6": jsonschema.Draft6Validator,
    "7": jsonschema.Draft7Validator,
    "2019-09": jsonschema.Draft201909Validator,
    "2020-12": jsonschema.Draft202012Validator,
}


def draft_of(document: Any) -> str:
    """The draft a schema declares in `$schema`; draft 7 when it declares none."""
    declared = document.get("$schema") if isinstance(document, dict) else None
    if not isinstance(declared, str):
        return "7"
    for marker, draft in (("draft-04", "4"), ("draft-06", "6"), ("draft-07", "7")):
        if marker in declared:
            return draft
    for draft in ("2019-09", "2020-12"):
        if f"draft/{draft}" in declared:
            return draft
    raise InvalidSchema(
        f"$schema {declared!r} is not a JSON Schema draft this registry knows "
        "(draft-04, -06, -07, 2019-09, 2020-12)"
    )


class JsonSchema:
    """A parsed JSON Schema with the documents it references."""

    def __init__(self, text: str, document: Any, documents: dict[str, Any]) -> None:
        self._text = text
        self.document = document
        self.documents = documents
        self.draft = draft_of(document)

    @property
    def schema_type(self) -> str:
        return "JSON"

    def text(self) -> str:
        return self._text

    def normalized(self) -> str:
        return canonical(self.document)

    def root(self) -> Node:
        """The schema as the tree of typed nodes the compatibility rules compare."""
        return Loader(self.document, self.documents, self.draft).load(self.document)


def _load_json(text: str, what: str) -> Any:
    try:
        document = json.loads(text)
    except RecursionError:
        raise InvalidSchema(f"{what} is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:
        raise InvalidSchema(f"{what} is not JSON: {error}") from None
    if not isinstance(document, dict | bool):
        raise InvalidSchema(f"{what} must be a JSON object or a boolean")
    _check_depth(document, what)
    return document


def _check_depth(document: Any, what: str) -> None:
    stack = [(document, 1)]
    while stack:
        value, level = stack.pop()
        if level > MAX_DEPTH:
            raise InvalidSchema(f"{what} is nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((child, level + 1) for child in value.values())
        elif isinstance(value, list):
            stack.extend((child, level + 1) for child in value)


class JsonSchemaKind:
    """The JSON schema type."""

    @property
    def name(self) -> str:
        return "JSON"

    def parse(self, text: str, references: Mapping[str, str]) -> JsonSchema:
        document = _load_json(text, "the schema")
        documents = {
            name: _load_json(ref_text, f"referenced schema {name!r}")
            for name, ref_text in references.items()
        }
        schema = JsonSchema(text, document, documents)
        try:
            VALIDATORS[schema.draft].check_schema(document)
        except jsonschema.exceptions.SchemaError as error:
            where = "/".join(str(p) for p in error.absolute_path) or "the top level"
            raise InvalidSchema(f"not a valid JSON Schema at {where}: {error.message}") from None
        try:
            Loader(document, documents, schema.draft).resolve_all(document)
            schema.root()
        except ValueError as error:
            raise InvalidSchema(str(error)) from None
        return schema

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        if not isinstance(reader, JsonSchema) or not isinstance(writer, JsonSchema):
            return [f"a {writer.schema_type} schema cannot be read as {reader.schema_type}"]
        try:
            found = jsonschema_diff.differences(writer.root(), reader.root())
        except jsonschema_diff.TooComplex:
            bound = jsonschema_diff.MAX_COMPARISONS
            return [f"the schemas are too complex to compare ({bound} subschema pairs)"]
        except ValueError as error:
            return [str(error)]
        return [
            f"Found incompatible change: Difference{{jsonPath='{path}', type={kind}}}"
            for kind, path in found
            if kind not in COMPATIBLE
        ]


KIND = JsonSchemaKind()
