"""What every schema type gives the registry (and tiering, the CLI, the console): parse a
schema's text (with the texts of the schemas it references), a normalized form for identity,
and the compatibility of a reader schema with a writer schema.

The registry (not the types) turns levels into pairs: BACKWARD asks whether the new schema,
as reader, reads data written with the previous one; FORWARD the reverse; FULL both; the
transitive levels ask it against every earlier version. A type answers only for one pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


class InvalidSchema(ValueError):
    """The text is not a schema of its type (Confluent's 42201); the message says why."""


@dataclass(frozen=True)
class Reference:
    """A schema's import of another subject's version, as Confluent's `references` entries:
    `name` is how the schema refers to it (an Avro full name, a JSON Schema `$ref` URL, a
    Protobuf import path)."""

    name: str
    subject: str
    version: int


class ParsedSchema(Protocol):
    """A schema that parsed, with the referenced schemas it was parsed against."""

    @property
    def schema_type(self) -> str:
        """The type as the REST API spells it: AVRO, JSON or PROTOBUF."""
        ...

    def text(self) -> str:
        """The schema as registered (what GET /schemas/ids/{id} answers)."""
        ...

    def normalized(self) -> str:
        """The form two schemas that mean the same thing share (Avro's canonical form,
        JSON with sorted keys, Protobuf's normalized text): used for `normalize=true` and
        to give one id to one schema."""
        ...


class SchemaKind(Protocol):
    """One schema type."""

    @property
    def name(self) -> str: ...

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedSchema:
        """Parse `text`; `references` maps each reference's name to the referenced schema's
        text. Raises InvalidSchema with a message a person understands."""
        ...

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        """Why `reader` cannot read data written with `writer`, one message each (the
        `messages` of a verbose compatibility answer); empty when it can."""
        ...
