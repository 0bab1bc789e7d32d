"""The registry's decisions over its store: parse and identify schemas, resolve references,
check compatibility under the subject's level, register, look up and delete. Every method
is blocking (Postgres); the routes run them on the registry's own threads."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import NamedTuple

from metadata.registry_store import (
    IdConflict,
    NewSchema,
    Registered,
    RegistryStore,
    StoredRef,
    StoredSchema,
    StoredVersion,
)
from registry.bodies import MAX_REFERENCES, SchemaRequest
from registry.errors import (
    ID_DOES_NOT_MATCH,
    INCOMPATIBLE_SCHEMA,
    RegistryError,
    invalid_schema,
    not_permitted,
    schema_not_found,
    subject_not_found,
    unprocessable,
    version_not_found,
)
from registry.levels import pairs
from registry.params import LATEST
from registry.settings import Settings
from schemaformat.base import InvalidSchema, ParsedSchema, SchemaKind

MAX_REFERENCE_DEPTH = 16
_PARSED_CACHE = 1024


class Candidate(NamedTuple):
    """A schema from a request, parsed against its references."""

    kind: SchemaKind
    parsed: ParsedSchema
    new: NewSchema


def identity(schema_type: str, normalized: str, refs: tuple[StoredRef, ...]) -> str:
    doc = [schema_type, normalized, [[r.name, r.subject, r.version] for r in refs]]
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()


class Registry:
    def __init__(self, store: RegistryStore, kinds: Mapping[str, SchemaKind]) -> None:
        self.store = store
        self.kinds = dict(kinds)
        self.settings = Settings(store)
        self._parsed: OrderedDict[int, ParsedSchema] = OrderedDict()

    # -- schemas ----------------------------------------------------------------------------

    def schema(self, schema_id: int) -> StoredSchema:
        found = self.store.schema(schema_id)
        if found is None:
            raise schema_not_found(str(schema_id))
        return found

    def candidate(self, req: SchemaRequest, normalize: bool) -> Candidate:
        kind = self.kinds[req.schema_type]
        refs = tuple(self._pin(r) for r in req.references)
        texts: dict[str, str] = {}
        self._resolve(refs, texts, 0)
        try:
            parsed = kind.parse(req.schema, texts)
        except InvalidSchema as exc:
            raise invalid_schema(str(exc)) from None
        except RecursionError:
            raise invalid_schema("the schema is nested too deeply") from None
        normalized = parsed.normalized()
        stored_text = normalized if normalize else parsed.text()
        new = NewSchema(
            req.schema_type, stored_text, refs, identity(req.schema_type, normalized, refs)
        )
        return Candidate(kind, parsed, new)

    def _pin(self, ref: StoredRef) -> StoredRef:
        """The reference with "latest" (-1) turned into the version it means now."""
        if ref.version != LATEST:
            return ref
        live = [v for v in self.store.versions(ref.subject) if not v.deleted]
        if not live:
            raise invalid_schema(f"reference {ref.name!r}: subject '{ref.subject}' not found")
        return ref._replace(version=live[-1].version)

    def _resolve(self, refs: tuple[StoredRef, ...], texts: dict[str, str], depth: int) -> None:
        """Referenced schemas' texts by name, dependencies first."""
        if depth > MAX_REFERENCE_DEPTH:
            raise invalid_schema(f"references nest deeper than {MAX_REFERENCE_DEPTH} levels")
        for ref in refs:
            if ref.name in texts:
                continue
            version = next(
                (v for v in self.store.versions(ref.subject) if v.version == ref.version), None
            )
            if version is None:
                raise invalid_schema(
                    f"reference {ref.name!r}: subject '{ref.subject}' has no version {ref.version}"
                )
            stored = self.schema(version.schema_id)
            self._resolve(stored.references, texts, depth + 1)
            texts[ref.name] = stored.text
            if len(texts) > MAX_REFERENCES:
                raise invalid_schema(f"more than {MAX_REFERENCES} schemas referenced in all")

    def parsed(self, schema_id: int) -> tuple[SchemaKind, ParsedSchema]:
        """A stored schema, parsed (cached: an id's schema never changes)."""
        stored = self.schema(schema_id)
        kind = self.kinds.get(stored.schema_type)
        if kind is None:
            raise RegistryError(500, 50001, f"schema {schema_id} has an unserved type")
        hit = self._parsed.get(schema_id)
        if hit is None:
            texts: dict[str, str] = {}
            self._resolve(stored.references, texts, 0)
            hit = kind.parse(stored.text, texts)
            self._parsed[schema_id] = hit
            if len(self._parsed) > _PARSED_CACHE:
                self._parsed.popitem(last=False)
        return kind, hit

    # -- subjects and versions ----------------------------------------------------------------

    def versions(self, subject: str, deleted: bool = False) -> list[StoredVersion]:
        """The subject's versions (with `deleted`, soft-deleted ones too); 40401 if none."""
        found = [v for v in self.store.versions(subject) if deleted or not v.deleted]
        if not found:
            raise subject_not_found(subject)
        return found

    def version(self, subject: str, number: int, deleted: bool = False) -> StoredVersion:
        found = self.versions(subject, deleted)
        if number == LATEST:
            return found[-1]
        for v in found:
            if v.version == number:
                return v
        raise version_not_found(subject, number)

    def lookup(self, subject: str, cand: Candidate, deleted: bool) -> StoredVersion:
        """The subject's version holding this schema (POST /subjects/{subject})."""
        ids = {s.id for s in self.store.schemas_by_identity(cand.new.identity)}
        for v in reversed(self.versions(subject, deleted)):
            if v.schema_id in ids:
                return v
        raise schema_not_found(f"for subject '{subject}'")

    # -- registration -----------------------------------------------------------------------

    def register(self, subject: str, req: SchemaRequest, normalize: bool) -> Registered:
        mode = self.settings.mode(subject)
        if mode == "READONLY":
            raise not_permitted(f"Subject {subject} is in read-only mode")
        importing = mode == "IMPORT"
        if not importing and (req.id is not None or req.version is not None):
            raise not_permitted(
                f"Subject {subject} is not in import mode: a schema id or version may only be "
                "given in IMPORT mode"
            )
        cand = self.candidate(req, normalize)
        level = self.settings.compatibility(subject)

        def check(existing: list[StoredVersion]) -> None:
            if not importing:
                self._compatible(subject, cand, [v for v in existing if not v.deleted], level)

        try:
            return self.store.register(subject, cand.new, check, req.id, req.version)
        except IdConflict as exc:
            raise unprocessable(ID_DOES_NOT_MATCH, str(exc)) from None

    def _compatible(
        self, subject: str, cand: Candidate, live: list[StoredVersion], level: str
    ) -> None:
        messages = self.incompatibilities(cand, live, level)
        if messages:
            raise RegistryError(
                409,
                INCOMPATIBLE_SCHEMA,
                f"Schema being registered is incompatible with an earlier schema for subject "
                f'"{subject}", details: [{", ".join(messages)}]',
            )

    def incompatibilities(
        self, cand: Candidate, against: list[StoredVersion], level: str
    ) -> list[str]:
        """Why `cand` breaks `level` against `against` (oldest first); empty: compatible."""
        out: list[str] = []
        new: StoredVersion | None = None  # the candidate's side of a pair
        for reader, writer in pairs(level, new, list(against)):
            old_version = writer if reader is None else reader
            assert old_version is not None
            _, old = self.parsed(old_version.schema_id)
            if old.schema_type != cand.parsed.schema_type:
                out.append(
                    f"Incompatible schema type: version {old_version.version} is "
                    f"{old.schema_type}, the new schema is {cand.parsed.schema_type}"
                )
                continue
            pair = (cand.parsed, old) if reader is None else (old, cand.parsed)
            for message in cand.kind.incompatibilities(*pair):
                out.append(f"{message}, {{oldSchemaVersion: {old_version.version}}}")
        if out:
            out.append(f"{{compatibility: '{level}'}}")
        return out
