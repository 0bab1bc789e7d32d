"""The Schema Registry as the console uses it (through the cluster's public HTTP API, under
/schema-registry): schemas by id, parsed with their references and cached per signed-in key,
and the Messages page's values decoded with them. A value in Confluent's wire format (magic
byte 0, a 4-byte schema id) is shown as the JSON it decodes to, with the schema's id, type,
message and the subject versions that registered it; one that does not decode keeps its raw
form and says why."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from starlette.requests import Request

from console import auth
from console.cluster_api import ClusterApi, ConsoleApiError
from console.message_view import Payload
from schemaformat.base import InvalidSchema, ParsedSchema
from schemaformat.kinds import kinds
from schemaformat.wire import HEADER, MAGIC, WireFormatError, decode, unframe

REGISTRY = "/schema-registry"
MAX_CACHED = 2_000
MAX_REFERENCE_DEPTH = 32


def subject_path(subject: str, *rest: str) -> str:
    return "/".join([f"{REGISTRY}/subjects/{quote(subject, safe='')}", *rest])


class Described:
    """A schema by id: parsed, and the (subject, version) pairs that registered it."""

    def __init__(self, schema: ParsedSchema, versions: list[dict[str, Any]]) -> None:
        self.schema = schema
        self.versions = versions


class SchemaCache:
    """Schemas by (key, id): an id names one schema forever, so each is fetched once per
    signed-in key (keys may see different subjects)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str | None, int], Described] = {}

    async def get(self, api: ClusterApi, key: str | None, schema_id: int) -> Described:
        hit = self._entries.get((key, schema_id))
        if hit is not None:
            return hit
        answer = await api.get(f"{REGISTRY}/schemas/ids/{schema_id}", key)
        texts = await _referenced(api, key, answer.get("references") or [], 0)
        kind = kinds().get(str(answer.get("schemaType") or "AVRO"))
        if kind is None:
            raise ConsoleApiError("INVALID_RECORD", f"schema {schema_id}: unknown type", 502)
        try:
            parsed = kind.parse(str(answer.get("schema", "")), texts)
        except InvalidSchema as exc:
            raise ConsoleApiError("INVALID_RECORD", f"schema {schema_id}: {exc}", 502) from None
        versions = await api.get(f"{REGISTRY}/schemas/ids/{schema_id}/versions", key)
        if len(self._entries) >= MAX_CACHED:
            self._entries.clear()
        described = Described(parsed, list(versions or []))
        self._entries[(key, schema_id)] = described
        return described


async def _referenced(
    api: ClusterApi, key: str | None, refs: list[Mapping[str, Any]], depth: int
) -> dict[str, str]:
    if depth > MAX_REFERENCE_DEPTH:
        raise ConsoleApiError("INVALID_RECORD", "schema references nest too deeply", 502)
    texts: dict[str, str] = {}
    for ref in refs:
        answer = await api.get(
            subject_path(str(ref["subject"]), "versions", str(ref["version"])), key
        )
        texts.update(await _referenced(api, key, answer.get("references") or [], depth + 1))
        texts[str(ref["name"])] = str(answer["schema"])
    return texts


def cache_of(request: Request) -> SchemaCache:
    cache = getattr(request.app.state, "schema_cache", None)
    if not isinstance(cache, SchemaCache):
        cache = SchemaCache()
        request.app.state.schema_cache = cache
    return cache


def _schema_value(value_b64: str | None) -> bytes | None:
    """The raw value if it may be in Confluent's wire format."""
    if not value_b64:
        return None
    raw = base64.b64decode(value_b64)
    return raw if len(raw) >= HEADER and raw[0] == MAGIC else None


async def decode_values(request: Request, rows: list[dict[str, Any]]) -> None:
    """Decodes each row's schema'd value in place (row["schema"] says with what)."""
    api, key, cache = request.app.state.api, auth.api_key(request), cache_of(request)
    for row in rows:
        raw = _schema_value(row.get("value_b64"))
        if raw is None:
            continue
        framed = unframe(raw)
        try:
            described = await cache.get(api, key, framed.schema_id)
            decoded = decode(described.schema, framed.body)
        except ConsoleApiError as exc:
            if exc.needs_login:
                raise
            row["schema"] = {"id": framed.schema_id, "error": exc.message}
            continue
        except WireFormatError as exc:
            row["schema"] = {"id": framed.schema_id, "error": str(exc)}
            continue
        text = json.dumps(decoded.value, indent=2, ensure_ascii=False)
        row["value"] = Payload("json", text, len(raw))
        row["schema"] = {
            "id": framed.schema_id,
            "type": described.schema.schema_type,
            "message": decoded.message,
            "versions": described.versions,
        }
