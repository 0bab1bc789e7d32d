"""Schemas by id, cached: an id names one schema forever, so after the first look-up a
consumer's `GET /schemas/ids/{id}` is one dict lookup and a prepared body. Only a hard
delete can make an id unknown again: it clears the cache here and, through
``NOTIFY tierlog_registry``, on every other node."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from metadata.registry_store import StoredSchema
from registry.http import Context
from registry.media import V1

_MAX = 100_000  # entries; past it the cache starts over rather than grow


def schema_fields(stored: StoredSchema) -> dict[str, Any]:
    """`schema`, and `schemaType` / `references` where Confluent sends them (not for AVRO,
    not when empty)."""
    out: dict[str, Any] = {"schema": stored.text}
    if stored.schema_type != "AVRO":
        out["schemaType"] = stored.schema_type
    if stored.references:
        out["references"] = [r._asdict() for r in stored.references]
    return out


class IdAnswers:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._cache: dict[int, tuple[StoredSchema, bytes]] = {}
        self._generation = 0

    def forget(self) -> None:
        """Drop everything (a hard delete happened here or on another node)."""
        self._generation += 1
        self._cache = {}

    async def _entry(self, schema_id: int) -> tuple[StoredSchema, bytes]:
        hit = self._cache.get(schema_id)
        if hit is not None:
            return hit
        generation = self._generation
        stored = await self._ctx.run(self._ctx.registry.schema, schema_id)
        entry = (stored, orjson.dumps(schema_fields(stored)))
        if generation == self._generation:  # not across a hard delete
            if len(self._cache) >= _MAX:
                self._cache = {}
            self._cache[schema_id] = entry
        return entry

    async def schema(self, schema_id: int) -> StoredSchema:
        return (await self._entry(schema_id))[0]

    async def answer(self, schema_id: int) -> Response:
        return Response((await self._entry(schema_id))[1], media_type=V1)
