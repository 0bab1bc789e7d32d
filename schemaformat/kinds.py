"""The schema types the registry serves, by the name the REST API gives them
(`schemaType`). A type is one line here.

Each type's module is imported when a schema of that type is first parsed: the JSON Schema
and Protobuf libraries (jsonschema, google.protobuf, grpc_tools) cost ~50 ms of CPU to
import, paid by every broker, fetch node and CLI process that builds a registry client,
though most never see such a schema."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from schemaformat.base import ParsedSchema, SchemaKind

# name as the REST API spells it → (module, class) of its SchemaKind
_TYPES = {
    "AVRO": ("schemaformat.avro", "AvroKind"),
    "JSON": ("schemaformat.jsonschema", "JsonSchemaKind"),
    "PROTOBUF": ("schemaformat.protobuf", "ProtobufKind"),
}


class _OnFirstUse:
    """A SchemaKind that imports the real one when first asked to parse or compare."""

    def __init__(self, name: str, module: str, cls: str) -> None:
        self._name, self._module, self._cls = name, module, cls
        self._kind: SchemaKind | None = None

    @property
    def name(self) -> str:
        return self._name

    def _real(self) -> SchemaKind:
        if self._kind is None:
            kind: SchemaKind = getattr(importlib.import_module(self._module), self._cls)()
            self._kind = kind
        return self._kind

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedSchema:
        return self._real().parse(text, references)

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        return self._real().incompatibilities(reader, writer)


def kinds() -> dict[str, SchemaKind]:
    """name → SchemaKind, for every type this build serves."""
    return {name: _OnFirstUse(name, module, cls) for name, (module, cls) in _TYPES.items()}
