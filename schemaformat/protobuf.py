"""PROTOBUF: `.proto` text (proto2 or proto3), or the base64 `FileDescriptorProto` that
confluent-kafka's Python ProtobufSerializer registers, compiled by protoc itself (grpcio-tools
runs it as a library) into descriptors: imports resolve to the references by name, and the
well-known types (`google/protobuf/*.proto`) are built in. The normalized form is the text
rendered back from the descriptor (protobuf_text.py); compatibility is Confluent's rules
(protobuf_diff.py).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path

import grpc_tools
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message
from grpc_tools import _protoc_compiler

from schemaformat.base import InvalidSchema, ParsedSchema
from schemaformat.protobuf_text import render

WELL_KNOWN = str(Path(grpc_tools.__file__).parent / "_proto")  # google/protobuf/*.proto
MAIN_FILE = "schema.proto"
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")


class ProtobufSchema:
    """A compiled `.proto`: `file` is its descriptor, `imports` those of every file it
    imports (transitively, well-known types included), in dependency order."""

    def __init__(
        self,
        text: str,
        file: descriptor_pb2.FileDescriptorProto,
        imports: list[descriptor_pb2.FileDescriptorProto],
    ) -> None:
        self._text = text
        self.file = file
        self.imports = imports

    @property
    def schema_type(self) -> str:
        return "PROTOBUF"

    def text(self) -> str:
        return self._text

    def normalized(self) -> str:
        return render(self.file)

    def serialized(self) -> str:
        """The base64 `FileDescriptorProto` (what `GET /schemas/ids/{id}?format=serialized`
        answers, and what confluent-kafka's Python deserializer reads)."""
        return base64.standard_b64encode(self.file.SerializeToString()).decode("ascii")

    def message_class(self, indexes: list[int]) -> type[Message]:
        """The message type that Confluent's message indexes name: the first is a top-level
        message's position in the file, each next one a nested message's position in it
        (map entries, which `.proto` text does not declare, are not counted, as in
        Confluent's Java serializer; confluent-kafka's Python one counts them)."""
        pool = descriptor_pool.DescriptorPool()
        for proto in [*self.imports, self.file]:
            pool.Add(proto)
        messages = list(self.file.message_type)
        prefix = f"{self.file.package}." if self.file.package else ""
        name = ""
        for depth, index in enumerate(indexes or [0]):
            if index >= len(messages):
                raise ValueError(f"message index {index} names no message at depth {depth}")
            name = (name + "." if name else prefix) + messages[index].name
            messages = [m for m in messages[index].nested_type if not m.options.map_entry]
        message_class: type[Message] = message_factory.GetMessageClass(
            pool.FindMessageTypeByName(name)
        )
        return message_class


def _decode_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """A base64 FileDescriptorProto, or None when the text is not one (then it is .proto)."""
    if not _BASE64.match(text):
        return None
    try:
        proto = descriptor_pb2.FileDescriptorProto()
        proto.ParseFromString(base64.b64decode("".join(text.split()), validate=True))
    except (binascii.Error, DecodeError, ValueError):
        return None
    return proto


def _as_text(text: str, what: str) -> str:
    proto = _decode_descriptor(text)
    if proto is None:
        return text
    try:
        return render(proto)
    except (KeyError, ValueError, IndexError) as error:
        raise InvalidSchema(
            f"{what} is a serialized descriptor that does not describe a file: {error}"
        ) from None


def _compile(files: dict[str, str], main: str) -> list[descriptor_pb2.FileDescriptorProto]:
    """Runs protoc on `files` (name → text): the descriptors of `main` and all it imports."""
    with tempfile.TemporaryDirectory(prefix="tierlog-proto-") as folder:
        for name, text in files.items():
            path = Path(folder, name).resolve()
            if not path.is_relative_to(Path(folder).resolve()):
                raise InvalidSchema(f"import name {name!r} leaves the schema's folder")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        includes = [folder.encode(), WELL_KNOWN.encode()]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter(
                    "ignore"
                )  # protoc's warnings (an unused import) are not errors
                _protoc_compiler.get_protos(main.encode(), includes)
        except _protoc_compiler.ProtocErrors as errors:
            raise InvalidSchema(_describe(errors, main)) from None
        out = os.path.join(folder, "descriptors.pb")
        arguments = [b"protoc", *(b"-I" + p for p in includes), b"--include_imports"]
        code = _protoc_compiler.run_main(
            [*arguments, b"--descriptor_set_out=" + out.encode(), main.encode()]
        )
        if code != 0:
            raise InvalidSchema("protoc could not compile the schema")
        descriptors = descriptor_pb2.FileDescriptorSet()
        descriptors.ParseFromString(Path(out).read_bytes())
    return list(descriptors.file)


def _describe(errors: _protoc_compiler.ProtocErrors, main: str) -> str:
    lines = []
    for error in errors.errors()[:5]:
        name = error.filename.decode() if isinstance(error.filename, bytes) else str(error.filename)
        where = "the schema" if name == main else f"reference {name!r}"
        message = error.message.decode() if isinstance(error.message, bytes) else str(error.message)
        if error.line < 0:  # a file protoc could not open: an import with no reference
            lines.append(f"import {name!r} names no reference of the schema")
        else:
            lines.append(f"{where}, line {error.line + 1}, column {error.column + 1}: {message}")
    return "invalid .proto: " + "; ".join(lines)


class ProtobufKind:
    """The PROTOBUF schema type."""

    @property
    def name(self) -> str:
        return "PROTOBUF"

    def parse(self, text: str, references: Mapping[str, str]) -> ProtobufSchema:
        main = MAIN_FILE
        while main in references:
            main = "_" + main
        files = {name: _as_text(ref, f"reference {name!r}") for name, ref in references.items()}
        files[main] = _as_text(text, "the schema")
        compiled = _compile(files, main)
        file = compiled[-1]
        shown = text if _decode_descriptor(text) is None else files[main]
        return ProtobufSchema(shown, file, compiled[:-1])

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        from schemaformat.protobuf_diff import COMPATIBLE, differences

        if not isinstance(reader, ProtobufSchema) or not isinstance(writer, ProtobufSchema):
            return [f"a {writer.schema_type} schema cannot be read as {reader.schema_type}"]
        return [
            f"Found incompatible change: Difference{{fullPath='{path}', type={kind}}}"
            for kind, path in differences(writer, reader)
            if kind not in COMPATIBLE
        ]


KIND = ProtobufKind()
