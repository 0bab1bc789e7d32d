"""Schemas for typed lake tables, read from the registry's store in Postgres (the database
tiering and fetch nodes already use), parsed with their references (schemaformat's types).
Shared by tiering (the typed columns it writes) and fetch nodes (hot records decoded alike)."""

from __future__ import annotations

from collections.abc import Mapping

from metadata.registry_store import RegistryStore, StoredRef
from schemaformat.base import InvalidSchema, ParsedSchema, SchemaKind
from schemaformat.kinds import kinds

MAX_REFERENCE_DEPTH = 32


class StoreLookup:
    """schemaformat.typed_decode.SchemaLookup over RegistryStore, for one topic's values
    (TopicNameStrategy: the subject `<topic>-value`)."""

    def __init__(self, store: RegistryStore, topic: str) -> None:
        self.store, self.subject = store, f"{topic}-value"
        self._kinds: Mapping[str, SchemaKind] = kinds()

    def schema(self, schema_id: int) -> ParsedSchema:
        stored = self.store.schema(schema_id)
        if stored is None:
            raise LookupError("no schema with this id is registered")
        kind = self._kinds.get(stored.schema_type)
        if kind is None:
            raise LookupError(f"schema type {stored.schema_type} is not served")
        try:
            return kind.parse(stored.text, self._texts(stored.references, 0))
        except InvalidSchema as error:
            raise LookupError(f"the registered schema does not parse: {error}") from None

    def latest_id(self) -> int | None:
        live = [v for v in self.store.versions(self.subject) if not v.deleted]
        return live[-1].schema_id if live else None

    def _texts(self, refs: tuple[StoredRef, ...], depth: int) -> dict[str, str]:
        """name → text of each reference, dependencies first."""
        if depth > MAX_REFERENCE_DEPTH:
            raise LookupError("schema references nest deeper than 32")
        texts: dict[str, str] = {}
        for ref in refs:
            used = [v for v in self.store.versions(ref.subject) if v.version == ref.version]
            stored = self.store.schema(used[0].schema_id) if used else None
            if stored is None:
                raise LookupError(f"reference {ref.subject} v{ref.version} is not registered")
            texts.update(self._texts(stored.references, depth + 1))
            texts[ref.name] = stored.text
        return texts
