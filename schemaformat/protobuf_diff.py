"""Confluent's Protobuf compatibility over compiled descriptors: the differences from a writer
(original) schema to a reader (update) one, named as Confluent's `Difference.Type` and located
by a path of type names and field numbers; compatible when all are in COMPATIBLE.

Fields are matched by number. A field's scalar type may change within its wire-compatible
group (int32/int64/uint32/uint64/bool/enums; sint32/sint64; string/bytes; fixed32/sfixed32;
fixed64/sfixed64); a message-typed field keeps its type's name, and a type that comes from a
reference is compared too. Adding or removing an optional field is compatible, a required one
is not; moving a field into a oneof with fields it was independent of is not; a changed
package or a removed message is not. Map entry messages are compared as their map fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2

from schemaformat.protobuf import ProtobufSchema
from schemaformat.protobuf_text import SCALARS

F = descriptor_pb2.FieldDescriptorProto
COMPATIBLE = frozenset(
    {
        "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED",
        "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED",
        "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED",
        "ONEOF_REMOVED", "ONEOF_FIELD_ADDED", "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
    }
)  # fmt: skip
SCALAR_GROUPS = {
    "int32": "GENERAL_NUMBER", "int64": "GENERAL_NUMBER", "uint32": "GENERAL_NUMBER",
    "uint64": "GENERAL_NUMBER", "bool": "GENERAL_NUMBER", "sint32": "SIGNED_NUMBER",
    "sint64": "SIGNED_NUMBER", "string": "STRING_OR_BYTES", "bytes": "STRING_OR_BYTES",
    "fixed32": "FIXED32", "sfixed32": "FIXED32", "fixed64": "FIXED64", "sfixed64": "FIXED64",
    "float": "FLOAT", "double": "DOUBLE",
}  # fmt: skip


@dataclass
class TypeInfo:
    """A message or enum by its full name: where it is declared and what it is."""

    package: str
    proto: Any  # DescriptorProto or EnumDescriptorProto
    is_enum: bool
    local: bool  # declared in the schema itself, not in an import


def _collect(schema: ProtobufSchema) -> dict[str, TypeInfo]:
    types: dict[str, TypeInfo] = {}
    for file in [*schema.imports, schema.file]:
        local = file is schema.file
        scope = file.package

        def walk(
            messages: Any, enums: Any, prefix: str, file: Any = file, local: bool = local
        ) -> None:
            for enum in enums:
                types[f"{prefix}{enum.name}"] = TypeInfo(file.package, enum, True, local)
            for message in messages:
                name = f"{prefix}{message.name}"
                types[name] = TypeInfo(file.package, message, False, local)
                walk(message.nested_type, message.enum_type, name + ".")

        walk(file.message_type, file.enum_type, f"{scope}." if scope else "")
    return types


@dataclass
class Context:
    original: dict[str, TypeInfo]
    update: dict[str, TypeInfo]
    syntax: tuple[str, str]
    path: list[str] = field(default_factory=list)
    diffs: list[tuple[str, str]] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)

    def add(self, kind: str, *more: str) -> None:
        self.diffs.append((kind, "#/" + "/".join([*self.path, *more])))

    def sub(self, path: list[str]) -> Context:
        return Context(self.original, self.update, self.syntax, path, [], self.seen)

    def compatible(self) -> bool:
        return all(kind in COMPATIBLE for kind, _ in self.diffs)


def differences(writer: ProtobufSchema, reader: ProtobufSchema) -> list[tuple[str, str]]:
    """Every difference from `writer` to `reader` as (type, path)."""
    syntax = (writer.file.syntax or "proto2", reader.file.syntax or "proto2")
    ctx = Context(_collect(writer), _collect(reader), syntax)
    if writer.file.package != reader.file.package:
        ctx.add("PACKAGE_CHANGED")
    original, update = writer.file, reader.file
    compare_types(
        ctx, (original.message_type, original.enum_type), (update.message_type, update.enum_type)
    )
    return ctx.diffs


def _messages(messages: Any) -> dict[str, tuple[Any, int]]:
    """Messages by name with their position among their siblings (map entries left out)."""
    kept = [m for m in messages if not m.options.map_entry]
    return {message.name: (message, index) for index, message in enumerate(kept)}


def compare_types(ctx: Context, original: tuple[Any, Any], update: tuple[Any, Any]) -> None:
    before, after = _messages(original[0]), _messages(update[0])
    for name in sorted(set(before) | set(after)):
        ctx.path.append(name)
        if name not in after:
            ctx.add("MESSAGE_REMOVED")
        elif name not in before:
            ctx.add("MESSAGE_ADDED")
        else:
            from schemaformat.protobuf_messages import compare_message

            compare_message(ctx, before[name][0], after[name][0])
            if before[name][1] != after[name][1]:
                ctx.add("MESSAGE_MOVED")
        ctx.path.pop()
    enums_before = {enum.name: enum for enum in original[1]}
    enums_after = {enum.name: enum for enum in update[1]}
    for name in sorted(set(enums_before) | set(enums_after)):
        ctx.path.append(name)
        if name not in enums_after:
            ctx.add("ENUM_REMOVED")
        elif name not in enums_before:
            ctx.add("ENUM_ADDED")
        else:
            _compare_enum(ctx, enums_before[name], enums_after[name])
        ctx.path.pop()


def _compare_enum(ctx: Context, original: Any, update: Any) -> None:
    before = {value.number: value.name for value in original.value}
    after = {value.number: value.name for value in update.value}
    for number in sorted(set(before) | set(after)):
        if number not in after:
            ctx.add("ENUM_CONST_REMOVED", str(number))
        elif number not in before:
            ctx.add("ENUM_CONST_ADDED", str(number))
        elif before[number] != after[number]:
            ctx.add("ENUM_CONST_CHANGED", str(number))


def field_type(types: dict[str, TypeInfo], proto: Any) -> tuple[str, ...]:
    """("scalar", name) for scalars and enums' numbers, ("message", full name), or
    ("map", key field, value field) for a map field."""
    if proto.type in SCALARS:
        return ("scalar", SCALARS[proto.type])
    name = proto.type_name.lstrip(".")
    info = types.get(name)
    if info is not None and info.is_enum:
        return ("enum", name)
    if info is not None and info.proto.options.map_entry:
        return ("map", name)
    return ("message", name)


def label_of(proto: Any, syntax: str, types: dict[str, TypeInfo]) -> str | None:
    """The label as written: proto3 singular fields have none, nor do map fields."""
    if field_type(types, proto)[0] == "map":
        return None
    if proto.HasField("oneof_index") and not proto.proto3_optional:
        return None  # a oneof's members are written without one
    if proto.label == F.LABEL_REPEATED:
        return "repeated"
    if proto.label == F.LABEL_REQUIRED:
        return "required"
    return "optional" if syntax == "proto2" or proto.proto3_optional else None
