"""Confluent's JSON Schema rules for objects (properties, required, dependencies, content
models, property counts) and tuples (positional item schemas)."""

from __future__ import annotations

from typing import Any

from schemaformat.jsonschema_diff import (
    Context,
    compare,
    compare_additional,
    compare_unevaluated,
    load_optional,
)
from schemaformat.jsonschema_model import Node
from schemaformat.jsonschema_rules import (
    compare_bound,
    dependencies,
    is_open,
    items_of,
    schema_from_partially_open,
)


def compare_object(ctx: Context, original: Node, update: Node) -> None:
    _compare_required(ctx, original, update)
    _compare_properties(ctx, original, update)
    _compare_dependencies(ctx, original, update)
    with ctx.enter("additionalProperties"):
        compare_additional(ctx, original, update, "ADDITIONAL_PROPERTIES", "properties")
    with ctx.enter("unevaluatedProperties"):
        key = "unevaluatedProperties"
        compare_unevaluated(ctx, original, update, "UNEVALUATED_PROPERTIES", key)
    compare_bound(ctx, original.raw, update.raw, "maxProperties", "MAX_PROPERTIES")
    compare_bound(ctx, original.raw, update.raw, "minProperties", "MIN_PROPERTIES")


def _properties(node: Node) -> dict[str, Any]:
    value = node.raw.get("properties")
    return value if isinstance(value, dict) else {}


def _required(node: Node) -> set[str]:
    value = node.raw.get("required")
    return {str(v) for v in value} if isinstance(value, list) else set()


def _has_default(schema: Any) -> bool:
    return isinstance(schema, dict) and "default" in schema


def _compare_required(ctx: Context, original: Node, update: Node) -> None:
    after_props = _properties(update)
    before_required, after_required = _required(original), _required(update)
    with ctx.enter("required"):
        for name in _properties(original):
            if name not in after_props:
                continue
            was, now = name in before_required, name in after_required
            if was and not now:
                ctx.add("REQUIRED_ATTRIBUTE_REMOVED", name)
            elif now and not was:
                with_default = _has_default(after_props[name])
                kind = "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if with_default else ""
                ctx.add(kind or "REQUIRED_ATTRIBUTE_ADDED", name)


def _compare_properties(ctx: Context, original: Node, update: Node) -> None:
    before, after = _properties(original), _properties(update)
    with ctx.enter("properties"):
        for name in sorted(set(before) | set(after)):
            with ctx.enter(name):
                if name not in after:
                    _property_removed(ctx, original.load(before[name]), update, name)
                elif name not in before:
                    _property_added(ctx, original, update, name, update.load(after[name]))
                else:
                    compare(ctx, original.load(before[name]), update.load(after[name]))


def _property_removed(ctx: Context, removed: Node, update: Node, name: str) -> None:
    """The reader dropped a property: fine if it still accepts whatever was there."""
    if is_open(update, "properties"):
        ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = schema_from_partially_open(update, "properties", name)
    if partial is not None:
        sub = ctx.sub()
        compare(sub, removed, update.load(partial))
        ctx.extend(sub)
        covered = "IS_COVERED" if sub.compatible() else "NOT_COVERED"
        ctx.add(f"PROPERTY_REMOVED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif removed.kind == "false":
        ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _property_added(ctx: Context, original: Node, update: Node, name: str, added: Node) -> None:
    """The reader added a property: fine only if the writer could not have written that
    name with another value (its model is closed, or its pattern/additional schema fits)."""
    required = name in _required(update)
    with_default = _has_default(_properties(update)[name])
    if is_open(original, "properties"):
        if added.kind in ("empty", "true"):
            ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
        elif required:
            default = "_WITH_DEFAULT" if with_default else ""
            ctx.add(f"REQUIRED_PROPERTY{default}_ADDED_TO_OPEN_CONTENT_MODEL")
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = schema_from_partially_open(original, "properties", name)
    if partial is not None:
        sub = ctx.sub()
        compare(sub, original.load(partial), added)
        ctx.extend(sub)
        covered = "IS_COVERED" if sub.compatible() else "NOT_COVERED"
        ctx.add(f"PROPERTY_ADDED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    if required:
        default = "_WITH_DEFAULT" if with_default else ""
        ctx.add(f"REQUIRED_PROPERTY{default}_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")


def _compare_dependencies(ctx: Context, original: Node, update: Node) -> None:
    arrays_before, schemas_before = dependencies(original)
    arrays_after, schemas_after = dependencies(update)
    with ctx.enter("dependencies"):
        for name in sorted(set(arrays_before) | set(arrays_after)):
            was, now = arrays_before.get(name), arrays_after.get(name)
            if now is None:
                ctx.add("DEPENDENCY_ARRAY_REMOVED", name)
            elif was is None:
                ctx.add("DEPENDENCY_ARRAY_ADDED", name)
            elif was != now:
                kind = "EXTENDED" if now >= was else "NARROWED" if was >= now else "CHANGED"
                ctx.add(f"DEPENDENCY_ARRAY_{kind}", name)
        for name in sorted(set(schemas_before) | set(schemas_after)):
            if name not in schemas_after:
                ctx.add("DEPENDENCY_SCHEMA_REMOVED", name)
            elif name not in schemas_before:
                ctx.add("DEPENDENCY_SCHEMA_ADDED", name)
            else:
                with ctx.enter(name):
                    before = original.load(schemas_before[name])
                    compare(ctx, before, update.load(schemas_after[name]))


def compare_tuples(ctx: Context, original: Node, update: Node) -> None:
    """Positional item schemas: shared positions compared; extra ones judged by the other
    side's content model, as for properties."""
    before = items_of(original)[1] or []
    after = items_of(update)[1] or []
    for index in range(min(len(before), len(after))):
        with ctx.enter(f"items/{index}"):
            compare(ctx, original.load(before[index]), update.load(after[index]))
    for index in range(len(after), len(before)):
        with ctx.enter(f"items/{index}"):
            _item_removed(ctx, original.load(before[index]), update)
    for index in range(len(before), len(after)):
        with ctx.enter(f"items/{index}"):
            _item_added(ctx, original, update.load(after[index]))


def _item_removed(ctx: Context, removed: Node, update: Node) -> None:
    if is_open(update, "items"):
        ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = schema_from_partially_open(update, "items")
    if partial is not None:
        sub = ctx.sub()
        compare(sub, removed, load_optional(update, partial))
        ctx.extend(sub)
        covered = "IS_COVERED" if sub.compatible() else "NOT_COVERED"
        ctx.add(f"ITEM_REMOVED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif removed.kind == "false":
        ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(ctx: Context, original: Node, added: Node) -> None:
    if is_open(original, "items"):
        empty = "WITH_EMPTY_SCHEMA_" if added.kind in ("empty", "true") else ""
        ctx.add(f"ITEM_{empty}ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = schema_from_partially_open(original, "items")
    if partial is not None:
        sub = ctx.sub()
        compare(sub, load_optional(original, partial), added)
        ctx.extend(sub)
        covered = "IS_COVERED" if sub.compatible() else "NOT_COVERED"
        ctx.add(f"ITEM_ADDED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    else:
        ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")
