"""Which JSON Schema differences are compatible (Confluent's strict set, its default), and
the keyword readings the comparison shares: bounds, content models, items, dependencies."""

from __future__ import annotations

from typing import Any, Protocol

from schemaformat.jsonschema_model import Node, property_patterns

# A reader that only widens what the writer allowed reads all the writer's data.
COMPATIBLE = frozenset(
    {
        "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED",
        "SCHEMA_REMOVED", "TYPE_EXTENDED",
        "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED",
        "MIN_LENGTH_REMOVED", "PATTERN_REMOVED",
        "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
        "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED",
        "EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED",
        "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
        "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
        "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED",
        "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED",
        "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED",
        "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
        "UNEVALUATED_PROPERTIES_ADDED", "UNEVALUATED_PROPERTIES_EXTENDED",
        "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED",
        "MAX_CONTAINS_INCREASED", "MAX_CONTAINS_REMOVED",
        "MIN_CONTAINS_DECREASED", "MIN_CONTAINS_REMOVED",
        "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED",
        "UNEVALUATED_ITEMS_ADDED", "UNEVALUATED_ITEMS_EXTENDED",
        "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
        "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ENUM_ARRAY_EXTENDED",
        "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED",
        "NOT_TYPE_NARROWED",
    }
)  # fmt: skip


class Adds(Protocol):
    def add(self, kind: str, sub: str = "") -> None: ...


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None  # draft 4's boolean exclusiveMaximum/-Minimum is a flag, not a bound
    return float(value)


def compare_bound(
    ctx: Adds, before: dict[str, Any], after: dict[str, Any], key: str, name: str
) -> None:
    """A numeric bound: added, removed, increased or decreased (COMPATIBLE says which of
    these widen what the reader accepts)."""
    old, new = _number(before.get(key)), _number(after.get(key))
    if old == new:
        return
    if old is None:
        ctx.add(f"{name}_ADDED", key)
    elif new is None:
        ctx.add(f"{name}_REMOVED", key)
    elif old < new:
        ctx.add(f"{name}_INCREASED", key)
    else:
        ctx.add(f"{name}_DECREASED", key)


def _draft(node: Node) -> str:
    return node.owner.draft if node.owner is not None else "7"


def items_of(node: Node) -> tuple[Any, list[Any] | None, Any]:
    """(the schema of every item, the tuple's item schemas, the additional items' value)."""
    raw = node.raw
    if _draft(node) == "2020-12":
        prefix = raw.get("prefixItems")
        if isinstance(prefix, list):
            return None, prefix, raw.get("items", True)
        items = raw.get("items")  # without prefixItems: a schema for all, or a yes/no for more
        return (None, None, items) if isinstance(items, bool) else (items, None, True)
    items = raw.get("items")
    if isinstance(items, list):
        return None, items, raw.get("additionalItems", True)
    return items, None, raw.get("additionalItems", True)


def additional(node: Node, of: str) -> tuple[bool, Any]:
    """(whether more properties/items than listed are allowed, their schema if one)."""
    value = items_of(node)[2] if of == "items" else node.raw.get("additionalProperties", True)
    return value is not False, value if isinstance(value, dict) else None


def unevaluated(node: Node, key: str) -> Any:
    value = node.raw.get(key)
    return value if isinstance(value, bool | dict) else None


def is_open(node: Node, of: str) -> bool:
    """Open content model: anything more is allowed, with no schema constraining it."""
    permits, schema = additional(node, of)
    if not permits or schema is not None:
        return False
    if of == "properties" and property_patterns(node.raw):
        return False
    left = unevaluated(node, "unevaluatedItems" if of == "items" else "unevaluatedProperties")
    return left is None or left is True or left == {}


def schema_from_partially_open(node: Node, of: str, name: str = "") -> Any:
    """The schema a partially open model gives an unlisted property (or item), or None."""
    if of == "properties":
        for pattern, schema in property_patterns(node.raw):
            if pattern.search(name):
                return schema
    permits, schema = additional(node, of)
    if schema is not None:
        return schema
    if permits:
        left = unevaluated(node, "unevaluatedItems" if of == "items" else "unevaluatedProperties")
        if isinstance(left, dict) and left:
            return left
    return None


def dependencies(node: Node) -> tuple[dict[str, set[str]], dict[str, Any]]:
    """(property → the properties it requires, property → the schema it brings)."""
    arrays: dict[str, set[str]] = {}
    schemas: dict[str, Any] = {}
    for key in ("dependencies", "dependentRequired", "dependentSchemas"):
        value = node.raw.get(key)
        if not isinstance(value, dict):
            continue
        for name, dependency in value.items():
            if isinstance(dependency, list):
                arrays[name] = {str(v) for v in dependency}
            else:
                schemas[name] = dependency
    return arrays, schemas
