"""The schema types the registry serves, by the name the REST API gives them
(`schemaType`). A type is one line here; JSON and PROTOBUF join when their modules land."""

from __future__ import annotations

from schemaformat.avro import AvroKind
from schemaformat.base import SchemaKind


def kinds() -> dict[str, SchemaKind]:
    """name → SchemaKind, for every type this build serves."""
    table: list[SchemaKind] = [
        AvroKind(),
    ]
    return {kind.name: kind for kind in table}
