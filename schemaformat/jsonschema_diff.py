"""Confluent's JSON Schema compatibility: the differences from a writer (original) schema to a
reader (update) schema, each named as Confluent's `Difference.Type` and located by a JSON
path; the reader can read the writer's data when every difference is in COMPATIBLE.

The rules (Confluent's strict set, its default): a reader may widen (remove or relax a
constraint, extend a type, an enum or a sum type) but not narrow. Open content models
(`additionalProperties` absent or true) matter most: a property added to a reader whose
writer was open is incompatible, since the open writer may have written that name with any
value; removing a property is compatible only where the reader is open (or its
`additionalProperties`/`patternProperties` schema covers the removed one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from typing import Any

from schemaformat.bipartite import maximum_matching
from schemaformat.jsonschema_model import Node, canonical
from schemaformat.jsonschema_rules import (
    COMPATIBLE,
    additional,
    compare_bound,
    items_of,
    unevaluated,
)

MAX_COMPARISONS = 20_000  # distinct pairs compared: bounds what a hostile schema pair costs


class TooComplex(Exception):
    """The pair of schemas needs more comparisons than MAX_COMPARISONS."""


class Context:
    """Differences found under one JSON path; sub-contexts try an alternative and are kept
    only when it turns out compatible."""

    def __init__(self, path: list[str], shared: dict[str, Any]) -> None:
        self.path = path
        self.diffs: list[tuple[str, str]] = []
        self.shared = shared  # pairs being compared (cycles), comparisons made

    def add(self, kind: str, sub: str = "") -> None:
        parts = [*self.path, sub] if sub else self.path
        self.diffs.append((kind, "#/" + "/".join(parts)))

    def extend(self, other: Context) -> None:
        self.diffs.extend(other.diffs)

    def sub(self) -> Context:
        return Context(list(self.path), self.shared)

    def compatible(self) -> bool:
        return all(kind in COMPATIBLE for kind, _ in self.diffs)

    @contextmanager
    def enter(self, *names: str) -> Iterator[None]:
        self.path.extend(names)
        try:
            yield
        finally:
            del self.path[len(self.path) - len(names) :]


def differences(writer: Node, reader: Node) -> list[tuple[str, str]]:
    """Every difference from `writer` to `reader` as (type, JSON path)."""
    ctx = Context([], {"stack": set(), "count": 0, "memo": {}, "truncated": 0})
    compare(ctx, writer, reader)
    return ctx.diffs


def compare(ctx: Context, original: Node | None, update: Node | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    original, update = original.target(), update.target()
    pair = (id(original), id(update))
    stack: set[tuple[int, int]] = ctx.shared["stack"]
    if pair in stack:  # a recursive schema met itself: the cycle adds nothing new
        ctx.shared["truncated"] += 1
        return
    memo: dict[tuple[str, int, str, int], list[tuple[str, str]]] = ctx.shared["memo"]
    same = (original.key(), id(original.doc), update.key(), id(update.doc))  # equal content
    found = memo.get(same)
    if found is None:
        found, complete = _compare_pair(ctx, original, update, pair)
        if complete:  # not cut short by a cycle: true wherever the same pair meets again
            memo[same] = found
    for kind, path in found:  # relative to the pair: placed under this context's path
        parts = [*ctx.path, path[2:]] if path != "#/" else ctx.path
        ctx.diffs.append((kind, "#/" + "/".join(parts)))


def _compare_pair(
    ctx: Context, original: Node, update: Node, pair: tuple[int, int]
) -> tuple[list[tuple[str, str]], bool]:
    """The pair's differences (relative to it), and whether no cycle cut them short.
    Schemas that repeat subschemas (definitions, combined members) meet equal pairs again
    and again: the memo answers those."""
    ctx.shared["count"] += 1
    if ctx.shared["count"] > MAX_COMPARISONS:
        raise TooComplex
    truncated = ctx.shared["truncated"]
    sub = Context([], ctx.shared)
    ctx.shared["stack"].add(pair)
    try:
        _compare_types(sub, original, update)
    finally:
        ctx.shared["stack"].discard(pair)
    return sub.diffs, ctx.shared["truncated"] == truncated


def _family(node: Node) -> str:
    return "number" if node.kind == "integer" else node.kind


def _compare_types(ctx: Context, original: Node, update: Node) -> None:
    if _union_shortcut(ctx, original, update):
        return
    if _family(original) != _family(update):
        if original.kind == "false" or update.kind in ("empty", "true"):
            return  # the writer wrote nothing, or the reader takes anything
        if _connect_bytes(original) and _connect_bytes(update):
            return  # Kafka Connect's decimal encodings, which Confluent treats as one
        ctx.add("TYPE_CHANGED")
        return
    _compare_meta(ctx, original, update)
    compare_kind = KIND_DIFFS.get(_family(original))
    if compare_kind is not None:
        compare_kind(ctx, original, update)


def _union_shortcut(ctx: Context, original: Node, update: Node) -> bool:
    """A plain schema against a combined one: a singleton combination is its member; a
    reader's anyOf/oneOf that has a member reading the writer extends it (sum type); a
    writer's allOf with a member the reader reads narrows it (product type)."""
    if original.kind != "combined" and update.kind == "combined":
        if len(update.subs) == 1:
            return _try(ctx, original, update.subs[0], "")
        if update.criterion in ("anyOf", "oneOf"):
            return any(_try(ctx, original, sub, "SUM_TYPE_EXTENDED") for sub in update.subs)
    elif original.kind == "combined" and update.kind != "combined":
        if len(original.subs) == 1:
            return _try(ctx, original.subs[0], update, "")
        if original.criterion == "allOf":
            return any(_try(ctx, sub, update, "PRODUCT_TYPE_NARROWED") for sub in original.subs)
    return False


def _try(ctx: Context, original: Node, update: Node, then: str) -> bool:
    sub = ctx.sub()
    compare(sub, original, update)
    if not sub.compatible():
        return False
    ctx.extend(sub)
    if then:
        ctx.add(then)
    return True


def _connect_bytes(node: Node) -> bool:
    return node.raw.get("connect.type") == "bytes"


def _compare_meta(ctx: Context, original: Node, update: Node) -> None:
    checks = (("ID_CHANGED", ("$id", "id")), ("TITLE_CHANGED", ("title",)))
    for kind, keys in (*checks, ("DESCRIPTION_CHANGED", ("description",))):
        if _meta(original, keys) != _meta(update, keys):
            ctx.add(kind)
    if _meta(original, ("default",)) != _meta(update, ("default",)):
        ctx.add("DEFAULT_CHANGED")


def _meta(node: Node, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        if key in node.meta:
            return canonical(node.meta[key])
    return None


def _compare_string(ctx: Context, original: Node, update: Node) -> None:
    compare_bound(ctx, original.raw, update.raw, "maxLength", "MAX_LENGTH")
    compare_bound(ctx, original.raw, update.raw, "minLength", "MIN_LENGTH")
    before, after = original.raw.get("pattern"), update.raw.get("pattern")
    if before is None and after is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif before is not None and after is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif before != after:
        ctx.add("PATTERN_CHANGED", "pattern")


def _compare_number(ctx: Context, original: Node, update: Node) -> None:
    before, after = original.raw, update.raw
    compare_bound(ctx, before, after, "maximum", "MAXIMUM")
    compare_bound(ctx, before, after, "minimum", "MINIMUM")
    compare_bound(ctx, before, after, "exclusiveMaximum", "EXCLUSIVE_MAXIMUM")
    compare_bound(ctx, before, after, "exclusiveMinimum", "EXCLUSIVE_MINIMUM")
    _compare_multiple_of(ctx, _decimal(before.get("multipleOf")), _decimal(after.get("multipleOf")))
    if (original.kind == "integer") != (update.kind == "integer"):
        ctx.add("TYPE_EXTENDED" if original.kind == "integer" else "TYPE_NARROWED")


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def _compare_multiple_of(ctx: Context, before: Decimal | None, after: Decimal | None) -> None:
    if before == after:
        return
    if before is None:
        ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
    elif after is None:
        ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
    elif before != 0 and after % before == 0:
        ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
    elif after != 0 and before % after == 0:
        ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
    else:
        ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")


def _compare_enum(ctx: Context, original: Node, update: Node) -> None:
    before = {canonical(v) for v in original.raw.get("enum") or []}
    after = {canonical(v) for v in update.raw.get("enum") or []}
    if before == after:
        return
    if after >= before:
        ctx.add("ENUM_ARRAY_EXTENDED", "enum")
    elif before >= after:
        ctx.add("ENUM_ARRAY_NARROWED", "enum")
    else:
        ctx.add("ENUM_ARRAY_CHANGED", "enum")


def _compare_const(ctx: Context, original: Node, update: Node) -> None:
    if canonical(original.raw.get("const")) != canonical(update.raw.get("const")):
        ctx.add("ENUM_ARRAY_CHANGED", "const")


def _compare_not(ctx: Context, original: Node, update: Node) -> None:
    with ctx.enter("not"):
        sub = ctx.sub()
        compare(sub, update.subs[0], original.subs[0])  # reversed: `not` flips the direction
        ctx.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED")


def _compare_combined(ctx: Context, original: Node, update: Node) -> None:
    changed = _compare_criteria(ctx, original, update)
    if changed:
        return
    before = list({sub.key(): sub for sub in original.subs}.values())
    after = list({sub.key(): sub for sub in update.subs}.values())
    if len(before) < len(after):
        ctx.add("PRODUCT_TYPE_EXTENDED" if update.criterion == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(before) > len(after):
        sum_type = original.criterion in ("anyOf", "oneOf")
        ctx.add("SUM_TYPE_NARROWED" if sum_type else "PRODUCT_TYPE_NARROWED")
    edges: dict[int, dict[int, list[tuple[str, str]]]] = {}
    for i, sub_before in enumerate(before):
        with ctx.enter(f"{original.criterion}/{i}"):
            for j, sub_after in enumerate(after):
                sub = ctx.sub()
                compare(sub, sub_before, sub_after)
                if sub.compatible():
                    edges.setdefault(i, {})[j] = sub.diffs
    matching = maximum_matching(edges)
    for j, i in sorted(matching.items()):
        ctx.diffs.extend(edges[i][j])
    if len(matching) < min(len(before), len(after)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _compare_criteria(ctx: Context, original: Node, update: Node) -> bool:
    """Adds the criterion's change; True when it is a change no subschema matching saves."""
    if original.criterion == update.criterion:
        return False
    single_before, single_after = len(original.subs) == 1, len(update.subs) == 1
    if (
        update.criterion == "anyOf"
        or (single_before and single_after)
        or (single_before and update.criterion == "oneOf")
        or (single_after and original.criterion == "allOf")
    ):
        ctx.add("COMBINED_TYPE_EXTENDED")
        return False
    ctx.add("COMBINED_TYPE_CHANGED")
    return True


def _compare_object(ctx: Context, original: Node, update: Node) -> None:
    from schemaformat.jsonschema_objects import compare_object

    compare_object(ctx, original, update)


def _compare_array(ctx: Context, original: Node, update: Node) -> None:
    with ctx.enter("items"):
        compare(
            ctx,
            load_optional(original, items_of(original)[0]),
            load_optional(update, items_of(update)[0]),
        )
    _compare_tuples(ctx, original, update)
    with ctx.enter("additionalItems"):
        compare_additional(ctx, original, update, "ADDITIONAL_ITEMS", "items")
    with ctx.enter("unevaluatedItems"):
        compare_unevaluated(ctx, original, update, "UNEVALUATED_ITEMS", "unevaluatedItems")
    before, after = original.raw, update.raw
    compare_bound(ctx, before, after, "maxItems", "MAX_ITEMS")
    compare_bound(ctx, before, after, "minItems", "MIN_ITEMS")
    unique_before, unique_after = bool(before.get("uniqueItems")), bool(after.get("uniqueItems"))
    if unique_before != unique_after:
        ctx.add("UNIQUE_ITEMS_REMOVED" if unique_before else "UNIQUE_ITEMS_ADDED", "uniqueItems")
    compare_bound(ctx, before, after, "maxContains", "MAX_CONTAINS")
    compare_bound(ctx, before, after, "minContains", "MIN_CONTAINS")


def load_optional(node: Node, value: Any) -> Node | None:
    return None if value is None else node.load(value)


def compare_additional(ctx: Context, original: Node, update: Node, name: str, of: str) -> None:
    """additionalItems/additionalProperties: permitted or not, and with which schema."""
    permits_before, schema_before = additional(original, of)
    permits_after, schema_after = additional(update, of)
    if permits_before != permits_after:
        ctx.add(f"{name}_ADDED" if permits_after else f"{name}_REMOVED")
    elif schema_before is None and schema_after is not None:
        ctx.add(f"{name}_NARROWED")
    elif schema_after is None and schema_before is not None:
        ctx.add(f"{name}_EXTENDED")
    else:
        compare(ctx, load_optional(original, schema_before), load_optional(update, schema_after))


def compare_unevaluated(ctx: Context, original: Node, update: Node, name: str, key: str) -> None:
    before, after = unevaluated(original, key), unevaluated(update, key)
    if before is None and after is None:
        return
    if before is None:
        ctx.add(f"{name}_REMOVED" if after is False else f"{name}_NARROWED")
    elif after is None:
        ctx.add(f"{name}_ADDED" if before is False else f"{name}_EXTENDED")
    elif before is False and after is not False:
        ctx.add(f"{name}_ADDED")
    elif before is not False and after is False:
        ctx.add(f"{name}_REMOVED")
    elif before in (True, {}) and after not in (True, {}):
        ctx.add(f"{name}_NARROWED")
    elif before not in (True, {}) and after in (True, {}):
        ctx.add(f"{name}_EXTENDED")
    else:
        compare(ctx, original.load(before), update.load(after))


def _compare_tuples(ctx: Context, original: Node, update: Node) -> None:
    from schemaformat.jsonschema_objects import compare_tuples

    compare_tuples(ctx, original, update)


KIND_DIFFS: dict[str, Callable[[Context, Node, Node], None]] = {
    "string": _compare_string,
    "number": _compare_number,
    "enum": _compare_enum,
    "const": _compare_const,
    "not": _compare_not,
    "combined": _compare_combined,
    "object": _compare_object,
    "array": _compare_array,
}
