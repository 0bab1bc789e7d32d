"""A `FileDescriptorProto` written back as `.proto` text: the normalized form of a Protobuf
schema, and the text of one registered as a serialized descriptor (as confluent-kafka's
Python serializer does). Type names are written fully qualified (with the leading dot), so
the text means the same wherever it is read; map fields, proto3 `optional`, oneofs, groups,
reserved ranges and names, extensions, options and services are kept."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2

F = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64",
    F.TYPE_UINT64: "uint64", F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64",
    F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool", F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32",
    F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64",
}  # fmt: skip
LABELS = {F.LABEL_OPTIONAL: "optional", F.LABEL_REQUIRED: "required", F.LABEL_REPEATED: "repeated"}
MAX_FIELD_NUMBER = 536_870_911


def render(file: descriptor_pb2.FileDescriptorProto) -> str:
    syntax = file.syntax or "proto2"
    lines = [f'edition = "{file.edition}";' if syntax == "editions" else f'syntax = "{syntax}";']
    if file.package:
        lines.append(f"package {file.package};")
    public, weak = set(file.public_dependency), set(file.weak_dependency)
    for index, name in sorted(enumerate(file.dependency), key=lambda pair: pair[1]):
        modifier = "public " if index in public else "weak " if index in weak else ""
        lines.append(f"import {modifier}{_quote(name)};")
    lines.extend(f"option {option};" for option in _options(file.options))
    body: list[str] = []
    scope = f".{file.package}" if file.package else ""
    for message in file.message_type:
        body.extend(_message(message, syntax, scope))
    for enum in file.enum_type:
        body.extend(_enum(enum))
    body.extend(_extends(file.extension, syntax))
    for service in file.service:
        body.extend(_service(service))
    return "\n".join([*lines, *body]) + "\n"


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _value(field: Any, value: Any) -> str:
    if field.enum_type is not None:
        return str(field.enum_type.values_by_number[value].name)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, bytes):
        return _quote(value.decode("latin-1"))
    return str(value)


def _options(options: Any) -> list[str]:
    """`name = value` for each option set (extensions as `(full.name)`); repeated and
    message-valued options are left out, as nothing that reads records depends on them."""
    found = []
    for field, value in options.ListFields():
        if field.is_repeated or field.message_type is not None:
            continue
        name = f"({field.full_name})" if field.is_extension else field.name
        found.append(f"{name} = {_value(field, value)}")
    return found


def _indent(lines: Iterable[str]) -> list[str]:
    return ["  " + line for line in lines]


def _type(field: descriptor_pb2.FieldDescriptorProto) -> str:
    return SCALARS.get(field.type) or field.type_name


def _camel(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(part[:1].upper() + part[1:] for part in parts[1:])


def _field_options(field: descriptor_pb2.FieldDescriptorProto) -> str:
    options = _options(field.options)
    if field.HasField("default_value"):
        default = field.default_value  # bytes' default is kept C-escaped, strings' is not
        if field.type == F.TYPE_STRING:
            default = _quote(default)
        elif field.type == F.TYPE_BYTES:
            default = f'"{default}"'
        options.insert(0, f"default = {default}")
    if field.HasField("json_name") and field.json_name != _camel(field.name):
        options.append(f"json_name = {_quote(field.json_name)}")
    return f" [{', '.join(options)}]" if options else ""


def _field(field: descriptor_pb2.FieldDescriptorProto, syntax: str, maps: dict[str, Any]) -> str:
    entry = maps.get(field.type_name)
    if entry is not None:
        key, value = entry.field[0], entry.field[1]
        declared = f"map<{_type(key)}, {_type(value)}>"
        return f"{declared} {field.name} = {field.number}{_field_options(field)};"
    label = LABELS[field.label]
    if syntax == "proto3" and field.label == F.LABEL_OPTIONAL and not field.proto3_optional:
        label = ""
    if field.HasField("oneof_index") and not field.proto3_optional:
        label = ""
    prefix = f"{label} " if label else ""
    return f"{prefix}{_type(field)} {field.name} = {field.number}{_field_options(field)};"


def _ranges(ranges: Iterable[Any], end_inclusive: bool) -> str:
    parts = []
    for item in ranges:
        last = item.end if end_inclusive else item.end - 1
        if item.start == last:
            parts.append(str(item.start))
        else:
            parts.append(f"{item.start} to {'max' if last >= MAX_FIELD_NUMBER else last}")
    return ", ".join(parts)


def _message(message: descriptor_pb2.DescriptorProto, syntax: str, scope: str) -> list[str]:
    """`scope` is the enclosing name with its leading dot (".pkg" or ".pkg.Outer")."""
    name = f"{scope}.{message.name}"
    nested_by_name = {f"{name}.{nested.name}": nested for nested in message.nested_type}
    maps = {key: entry for key, entry in nested_by_name.items() if entry.options.map_entry}
    groups = {f.type_name for f in message.field if f.type == F.TYPE_GROUP}
    body = [f"option {option};" for option in _options(message.options)]
    oneofs_done: set[int] = set()
    for field in message.field:
        if field.HasField("oneof_index") and not field.proto3_optional:
            if field.oneof_index not in oneofs_done:
                oneofs_done.add(field.oneof_index)
                body.extend(_oneof(message, field.oneof_index, syntax, maps))
        elif field.type == F.TYPE_GROUP and field.type_name in nested_by_name:
            body.extend(_group(field, nested_by_name[field.type_name], syntax, name))
        else:
            body.append(_field(field, syntax, maps))
    for key, nested in nested_by_name.items():
        if key not in maps and key not in groups:
            body.extend(_message(nested, syntax, name))
    for enum in message.enum_type:
        body.extend(_enum(enum))
    body.extend(_extends(message.extension, syntax))
    if message.extension_range:
        body.append(f"extensions {_ranges(message.extension_range, end_inclusive=False)};")
    body.extend(_reserved(message.reserved_range, message.reserved_name, end_inclusive=False))
    return [f"message {message.name} {{", *_indent(body), "}"]


def _group(field: Any, nested: Any, syntax: str, scope: str) -> list[str]:
    """A proto2 group: the field and its message type are declared together."""
    inner = _message(nested, syntax, scope)[1:-1]
    header = f"{LABELS[field.label]} group {nested.name} = {field.number}{_field_options(field)}"
    return [f"{header} {{", *inner, "}"]


def _oneof(message: Any, index: int, syntax: str, maps: dict[str, Any]) -> list[str]:
    fields = [
        _field(f, syntax, maps)
        for f in message.field
        if f.HasField("oneof_index") and f.oneof_index == index
    ]
    return [f"oneof {message.oneof_decl[index].name} {{", *_indent(fields), "}"]


def _reserved(ranges: Any, names: Any, end_inclusive: bool) -> list[str]:
    lines = []
    if ranges:
        lines.append(f"reserved {_ranges(ranges, end_inclusive)};")
    if names:
        lines.append(f"reserved {', '.join(_quote(name) for name in names)};")
    return lines


def _enum(enum: descriptor_pb2.EnumDescriptorProto) -> list[str]:
    body = [f"option {option};" for option in _options(enum.options)]
    for value in enum.value:
        options = _options(value.options)
        suffix = f" [{', '.join(options)}]" if options else ""
        body.append(f"{value.name} = {value.number}{suffix};")
    body.extend(_reserved(enum.reserved_range, enum.reserved_name, end_inclusive=True))
    return [f"enum {enum.name} {{", *_indent(body), "}"]


def _extends(fields: Iterable[descriptor_pb2.FieldDescriptorProto], syntax: str) -> list[str]:
    by_extendee: dict[str, list[str]] = {}
    for field in fields:
        by_extendee.setdefault(field.extendee, []).append(_field(field, syntax, {}))
    lines: list[str] = []
    for extendee, declared in by_extendee.items():
        lines.extend([f"extend {extendee} {{", *_indent(declared), "}"])
    return lines


def _service(service: descriptor_pb2.ServiceDescriptorProto) -> list[str]:
    body = [f"option {option};" for option in _options(service.options)]
    for method in service.method:
        takes = f"{'stream ' if method.client_streaming else ''}{method.input_type}"
        gives = f"{'stream ' if method.server_streaming else ''}{method.output_type}"
        options = _options(method.options)
        tail = " { " + " ".join(f"option {o};" for o in options) + " }" if options else ";"
        body.append(f"rpc {method.name} ({takes}) returns ({gives}){tail}")
    return [f"service {service.name} {{", *_indent(body), "}"]
