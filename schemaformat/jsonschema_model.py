"""A JSON Schema document as the tree of typed nodes Confluent's compatibility rules work on.

Confluent loads a schema with the Everit library into typed schemas (string, number, object,
array, enum, combined, ...) and compares those, so the loading rules decide the answers too:
an explicit `type` keeps only that type's keywords; a list of types is an `anyOf` of one node
per type; without `type` each keyword family (object, array, number, string) makes a node of
its own; several nodes (e.g. `type` and `enum`) are a synthetic `allOf`; nothing is the empty
schema. `$ref` nodes resolve lazily, through the same cache, so recursive schemas are finite.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

OBJECT_KEYWORDS = (
    "properties", "required", "additionalProperties", "patternProperties", "minProperties",
    "maxProperties", "dependencies", "dependentRequired", "dependentSchemas", "propertyNames",
    "unevaluatedProperties",
)  # fmt: skip
ARRAY_KEYWORDS = (
    "items", "additionalItems", "prefixItems", "minItems", "maxItems", "uniqueItems",
    "contains", "minContains", "maxContains", "unevaluatedItems",
)  # fmt: skip
NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
TYPE_FAMILIES = (
    ("object", OBJECT_KEYWORDS),
    ("array", ARRAY_KEYWORDS),
    ("number", NUMBER_KEYWORDS),
    ("string", STRING_KEYWORDS),
)
COMBINERS = ("allOf", "anyOf", "oneOf")


def canonical(value: Any) -> str:
    """One string per JSON value: equal values (as Everit compares them) give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(eq=False)
class Node:
    """One typed schema. `kind` is empty, true, false, string, number, integer, boolean, null,
    object, array, enum, const, not, combined, conditional or ref; `raw` the JSON it came from
    (for the typed kinds, the keywords that apply)."""

    kind: str
    raw: dict[str, Any]
    criterion: str = ""  # combined: allOf, anyOf or oneOf
    subs: list[Node] = field(default_factory=list)  # combined's subschemas; not's one schema
    meta: dict[str, Any] = field(default_factory=dict)  # $id, title, description, default
    resolve: Callable[[], Node] | None = None  # ref: the node it points at
    doc: Any = None  # the document it sits in (where its own `$ref`s resolve)
    owner: Loader | None = None  # the loader that loads its children
    origin: str = ""  # "types" for the anyOf a list of types makes (beside a keyword anyOf)
    _key: str | None = None

    def load(self, value: Any) -> Node:
        """A child schema of this node (a property's, an item's, ...)."""
        assert self.owner is not None, "nodes are made by a Loader"
        return self.owner.load(value, self.doc)

    def key(self) -> str:
        """Equal for equal schemas (duplicate subschemas of a combined schema collapse)."""
        if self._key is None:  # computed once: canonical() walks the whole subtree
            self._key = f"{self.kind}:{self.criterion}:{self.origin}:{canonical(self.raw)}"
        return self._key

    def target(self) -> Node:
        """Follows `$ref`s to the node meant."""
        node, hops = self, 0
        while node.kind == "ref" and node.resolve is not None and hops < 100:
            node, hops = node.resolve(), hops + 1
        return node

    def child(self, keyword: str) -> Any:
        return self.raw.get(keyword)


class Loader:
    """Builds nodes for one document, resolving `$ref` within it and to referenced documents
    (`documents`: a reference's name → its parsed JSON)."""

    def __init__(self, root: Any, documents: dict[str, Any], draft: str) -> None:
        self.root = root
        self.documents = documents
        self.draft = draft
        self._cache: dict[tuple[int, str], Node] = {}

    def load(self, value: Any, doc: Any | None = None) -> Node:
        doc = self.root if doc is None else doc
        key = (id(value), str(id(doc)))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        node = self._build(value, doc)
        self._cache[key] = node
        return node

    def _build(self, value: Any, doc: Any) -> Node:
        if value is True:
            return Node("true", {})
        if value is False:
            return Node("false", {})
        if not isinstance(value, dict):
            raise ValueError(f"a schema must be an object or a boolean, not {canonical(value)}")
        meta = {k: value[k] for k in ("$id", "id", "title", "description", "default") if k in value}
        if "$ref" in value and (self.draft in ("4", "6", "7") or len(value) == 1):
            node = self._ref(value, doc)
        else:
            parts = self._parts(value, doc)
            if not parts:
                node = Node("empty", value)
            elif len(parts) == 1:
                node = parts[0]
            else:
                node = Node("combined", value, criterion="allOf", subs=parts)
        node.meta, node.doc, node.owner = meta, doc, self
        return node

    def _parts(self, value: dict[str, Any], doc: Any) -> list[Node]:
        parts: list[Node] = []
        if "$ref" in value:
            parts.append(self._ref(value, doc))
        for criterion in COMBINERS:
            if isinstance(value.get(criterion), list):
                subs = [self.load(sub, doc) for sub in value[criterion]]
                parts.append(Node("combined", value, criterion, subs))
        if "not" in value:
            parts.append(Node("not", value, subs=[self.load(value["not"], doc)]))
        parts.extend(Node(kind, value) for kind in ("enum", "const") if kind in value)
        if "if" in value:
            parts.append(Node("conditional", value))
        parts.extend(_typed(value))
        for part in parts:
            part.doc, part.owner = doc, self
            for sub in part.subs:  # a list of types' nodes
                sub.doc, sub.owner = doc, self
        return parts

    def _ref(self, value: dict[str, Any], doc: Any) -> Node:
        url = str(value["$ref"])
        target_doc, pointer = self._locate(url, doc)
        target_value = _pointer(target_doc, pointer, url)
        resolve = lambda: self.load(target_value, target_doc)  # noqa: E731 (lazy: may recurse)
        return Node("ref", value, resolve=resolve, doc=doc, owner=self)

    def _locate(self, url: str, doc: Any) -> tuple[Any, str]:
        base, _, fragment = url.partition("#")
        if not base or _document_id(doc) == base:
            return doc, fragment
        for name, candidate in self.documents.items():
            if base in (name, _document_id(candidate)) or name.endswith("/" + base):
                return candidate, fragment
        root_id = _document_id(self.root)
        if root_id and root_id.rsplit("/", 1)[0] + "/" + base == root_id:
            return self.root, fragment
        raise ValueError(f"$ref {url!r} names no schema among the references")

    def resolve_all(self, value: Any, doc: Any | None = None, depth: int = 0) -> None:
        """Resolves every `$ref` once, so a dangling one fails at parse time."""
        doc = self.root if doc is None else doc
        if depth > 64:
            raise ValueError("the schema is nested deeper than 64 levels")
        if isinstance(value, dict):
            if isinstance(value.get("$ref"), str):
                target_doc, pointer = self._locate(value["$ref"], doc)
                _pointer(target_doc, pointer, value["$ref"])
            for key, sub in value.items():
                if key not in ("enum", "const", "default", "examples"):
                    self.resolve_all(sub, doc, depth + 1)
        elif isinstance(value, list):
            for sub in value:
                self.resolve_all(sub, doc, depth + 1)


def _typed(value: dict[str, Any]) -> list[Node]:
    declared = value.get("type")
    if isinstance(declared, str):
        return [_typed_node(declared, value)]
    if isinstance(declared, list):
        subs = [_typed_node(str(t), value) for t in declared]
        return [Node("combined", value, "anyOf", subs, origin="types")]
    return [
        Node(family, value) for family, words in TYPE_FAMILIES if any(k in value for k in words)
    ]


def _typed_node(declared: str, value: dict[str, Any]) -> Node:
    kinds = {"string", "number", "integer", "boolean", "null", "object", "array"}
    if declared not in kinds:
        raise ValueError(f"unknown type {declared!r}")
    return Node(declared, value)


def _document_id(doc: Any) -> str:
    if isinstance(doc, dict):
        return str(doc.get("$id") or doc.get("id") or "")
    return ""


def _pointer(doc: Any, pointer: str, url: str) -> Any:
    node = doc
    for token in [t for t in pointer.split("/") if t][: 64 + 1]:
        key = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise ValueError(f"$ref {url!r} points at nothing in its schema")
    return node


def property_patterns(raw: dict[str, Any]) -> list[tuple[re.Pattern[str], Any]]:
    """`patternProperties` compiled; a pattern Python cannot compile matches nothing."""
    patterns = raw.get("patternProperties")
    compiled: list[tuple[re.Pattern[str], Any]] = []
    if isinstance(patterns, dict):
        for pattern, schema in patterns.items():
            try:
                compiled.append((re.compile(pattern), schema))
            except re.error:
                continue
    return compiled
