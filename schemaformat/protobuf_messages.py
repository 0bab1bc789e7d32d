"""Confluent's Protobuf rules inside one message: fields matched by number wherever they sit
(top level or a oneof), oneofs added, removed or merged, and each field's name, label and
type compared (scalars by wire-compatible group, messages by name and, when from a
reference, by content)."""

from __future__ import annotations

from typing import Any

from schemaformat.protobuf_diff import SCALAR_GROUPS, Context, compare_types, field_type, label_of

NUMERIC_GROUPS = {"GENERAL_NUMBER", "SIGNED_NUMBER", "FIXED32", "FIXED64", "FLOAT", "DOUBLE"}


def _fields(message: Any) -> tuple[dict[int, Any], dict[int, str], dict[str, list[int]]]:
    """(field by number, number → its oneof, oneof → its numbers); proto3 `optional`'s
    synthetic oneofs are no oneofs."""
    by_number = {f.number: f for f in message.field}
    in_oneof: dict[int, str] = {}
    oneofs: dict[str, list[int]] = {}
    for f in message.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            name = message.oneof_decl[f.oneof_index].name
            in_oneof[f.number] = name
            oneofs.setdefault(name, []).append(f.number)
    return by_number, in_oneof, oneofs


def compare_message(ctx: Context, original: Any, update: Any) -> None:
    if id(original) not in ctx.seen:  # a recursive type is compared once
        ctx.seen.add(id(original))
        try:
            _compare_fields(ctx, original, update)
        finally:
            ctx.seen.discard(id(original))
    compare_types(
        ctx, (original.nested_type, original.enum_type), (update.nested_type, update.enum_type)
    )


def _compare_fields(ctx: Context, original: Any, update: Any) -> None:
    before, before_oneof, before_oneofs = _fields(original)
    after, after_oneof, after_oneofs = _fields(update)
    deleted = {
        name
        for name, numbers in before_oneofs.items()
        if name not in after_oneofs and not any(n in after for n in numbers)
    }
    _new_exclusivity(ctx, after_oneofs, before, before_oneof)
    for name in sorted(set(before_oneofs) | set(after_oneofs)):
        if name not in after_oneofs:
            ctx.add("ONEOF_REMOVED", name)
        elif name not in before_oneofs:
            ctx.add("ONEOF_ADDED", name)
    for number in sorted(set(before) | set(after)):
        was, now = before_oneof.get(number), after_oneof.get(number)
        if number not in after:
            if was is None:
                required = label_of(before[number], ctx.syntax[0], ctx.original) == "required"
                ctx.add("REQUIRED_FIELD_REMOVED" if required else "FIELD_REMOVED", str(number))
            elif was not in deleted:
                ctx.add("ONEOF_FIELD_REMOVED", was, str(number))
        elif number not in before:
            if now is not None:
                ctx.add("ONEOF_FIELD_ADDED", now, str(number))
            else:
                required = label_of(after[number], ctx.syntax[1], ctx.update) == "required"
                ctx.add("REQUIRED_FIELD_ADDED" if required else "FIELD_ADDED", str(number))
        else:
            if was is not None and now is None:
                ctx.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", str(number))
            where = [now, str(number)] if now is not None else [str(number)]
            ctx.path.extend(where)
            compare_field(ctx, before[number], after[number])
            del ctx.path[len(ctx.path) - len(where) :]


def _new_exclusivity(
    ctx: Context,
    after_oneofs: dict[str, list[int]],
    before: dict[int, Any],
    before_oneof: dict[int, str],
) -> None:
    """A reader's oneof whose old members came from more than one writer group (a oneof,
    or a top-level field each) makes fields exclusive that were not."""
    for name, numbers in after_oneofs.items():
        groups: set[str] = set()
        moved_in = 0
        for number in numbers:
            if number in before_oneof:
                groups.add("oneof:" + before_oneof[number])
            elif number in before:
                groups.add(f"field:{number}")
                moved_in += 1
        if len(groups) > 1:
            kind = (
                "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
                if moved_in > 1
                else "FIELD_MOVED_TO_EXISTING_ONEOF"
            )
            ctx.add(kind, name)


def compare_field(ctx: Context, original: Any, update: Any) -> None:
    if original.name != update.name:
        ctx.add("FIELD_NAME_CHANGED")
    labels = (
        label_of(original, ctx.syntax[0], ctx.original),
        label_of(update, ctx.syntax[1], ctx.update),
    )
    _compare_types(ctx, labels, field_type(ctx.original, original), field_type(ctx.update, update))


def _kind(declared: tuple[str, ...]) -> str:
    return {"scalar": "SCALAR", "enum": "SCALAR", "map": "MAP"}.get(declared[0], "MESSAGE")


def _compare_types(
    ctx: Context,
    labels: tuple[str | None, str | None],
    before: tuple[str, ...],
    after: tuple[str, ...],
) -> None:
    if _kind(before) != _kind(after):
        ctx.add("FIELD_KIND_CHANGED")
    elif _kind(before) == "SCALAR":
        group_before = "GENERAL_NUMBER" if before[0] == "enum" else SCALAR_GROUPS[before[1]]
        group_after = "GENERAL_NUMBER" if after[0] == "enum" else SCALAR_GROUPS[after[1]]
        if group_before != group_after:
            ctx.add("FIELD_SCALAR_KIND_CHANGED")
        elif None not in labels and labels[0] != labels[1]:
            if group_before in NUMERIC_GROUPS:
                ctx.add("FIELD_NUMERIC_LABEL_CHANGED")
            elif group_before == "STRING_OR_BYTES":
                ctx.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED")
    elif _kind(before) == "MESSAGE":
        _compare_message_types(ctx, before[1], after[1])
    else:
        entry_before, entry_after = ctx.original[before[1]].proto, ctx.update[after[1]].proto
        for index in (0, 1):  # the key, then the value
            from_type = field_type(ctx.original, entry_before.field[index])
            _compare_types(
                ctx, (None, None), from_type, field_type(ctx.update, entry_after.field[index])
            )


def _compare_message_types(ctx: Context, before: str, after: str) -> None:
    info_before, info_after = ctx.original.get(before), ctx.update.get(after)
    if info_before is None or info_after is None:
        if before != after:
            ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    local_before = _local(before, info_before.package)
    if local_before != _local(after, info_after.package):
        ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    if info_before.local and info_after.local:
        return  # the schema's own messages are compared where they are declared
    sub = ctx.sub(local_before.split("."))
    compare_message(sub, info_before.proto, info_after.proto)
    ctx.diffs.extend(sub.diffs)
    if not sub.compatible():
        ctx.add("FIELD_NAMED_TYPE_CHANGED")


def _local(name: str, package: str) -> str:
    return name[len(package) + 1 :] if package and name.startswith(package + ".") else name
