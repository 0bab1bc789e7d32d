"""The schema types the registry serves, by the name the REST API gives them
(`schemaType`). A type is one line here."""

from __future__ import annotations

from schemaformat.avro import AvroKind
from schemaformat.base import SchemaKind
from schemaformat.jsonschema import JsonSchemaKind
from schemaformat.protobuf import ProtobufKind


def kinds() -> dict[str, SchemaKind]:
    """name → SchemaKind, for every type this build serves."""
    table: list[SchemaKind] = [
        AvroKind(),
        JsonSchemaKind(),
        ProtobufKind(),
    ]
    return {kind.name: kind for kind in table}
