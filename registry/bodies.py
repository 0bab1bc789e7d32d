"""Request bodies: the schema a client sends to register, look up or check, and the
settings it PUTs, with Confluent's answers for bad ones."""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from metadata.registry_store import StoredRef
from registry.errors import (
    SCHEMA_TOO_LARGE,
    UNPROCESSABLE,
    RegistryError,
    invalid_schema,
    unprocessable,
)
from registry.params import INT_MAX

MAX_SCHEMA_BYTES = 1024 * 1024  # Confluent Cloud's limit: bigger is refused with 42209
MAX_BODY_BYTES = 2 * MAX_SCHEMA_BYTES  # JSON escaping may double a schema's size
MAX_REFERENCES = 100


class SchemaRequest(NamedTuple):
    schema: str
    schema_type: str
    references: tuple[StoredRef, ...]
    id: int | None
    version: int | None


def too_large(size: int) -> RegistryError:
    return unprocessable(
        SCHEMA_TOO_LARGE,
        f"the request is {size} bytes; a schema may be at most {MAX_SCHEMA_BYTES} bytes",
    )


def json_object(body: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RegistryError(400, 400, f"the body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RegistryError(422, UNPROCESSABLE, "the body must be a JSON object")
    return doc


def _optional_int(doc: dict[str, Any], name: str, lo: int) -> int | None:
    value = doc.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= INT_MAX:
        raise RegistryError(422, UNPROCESSABLE, f'"{name}" must be an integer in [{lo}, {INT_MAX}]')
    return value


def _reference(raw: object) -> StoredRef:
    if not isinstance(raw, dict):
        raise invalid_schema("each reference is an object {name, subject, version}")
    name, subject, version = raw.get("name"), raw.get("subject"), raw.get("version")
    if not isinstance(name, str) or not name or not isinstance(subject, str) or not subject:
        raise invalid_schema("a reference needs a non-empty name and subject")
    if (
        isinstance(version, bool)
        or not isinstance(version, int)
        or not (version == -1 or 1 <= version <= INT_MAX)
    ):
        raise invalid_schema(f"reference {name!r} has no valid version (1.. or -1 for latest)")
    return StoredRef(name, subject, version)


def schema_request(body: bytes, known_types: tuple[str, ...]) -> SchemaRequest:
    doc = json_object(body)
    schema = doc.get("schema")
    if not isinstance(schema, str) or not schema.strip():
        raise invalid_schema('the body needs "schema", the schema as a string')
    if len(schema.encode()) > MAX_SCHEMA_BYTES:
        raise too_large(len(schema.encode()))
    schema_type = doc.get("schemaType") or "AVRO"
    if schema_type not in known_types:
        raise invalid_schema(
            f"unknown schemaType {schema_type!r}; this registry takes {', '.join(known_types)}"
        )
    refs = doc.get("references") or []
    if not isinstance(refs, list) or len(refs) > MAX_REFERENCES:
        raise invalid_schema(f'"references" must be a list of at most {MAX_REFERENCES} entries')
    return SchemaRequest(
        schema,
        schema_type,
        tuple(_reference(r) for r in refs),
        _optional_int(doc, "id", 1),
        _optional_int(doc, "version", 1),
    )


def setting(body: bytes, key: str, allowed: tuple[str, ...], code: int) -> str:
    """The value of `key` in a PUT /config or /mode body, one of `allowed`."""
    value = json_object(body).get(key)
    if not isinstance(value, str) or value.upper() not in allowed:
        raise unprocessable(
            code, f"Invalid {key} {value!r}: it must be one of {', '.join(allowed)}"
        )
    return value.upper()
