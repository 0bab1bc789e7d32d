"""`tierlog consume --value-format avro|protobuf|json-sr`: values written by Confluent's
serializers (magic byte, schema id, payload) printed as JSON, decoded with the schema the id
names, fetched from the Schema Registry once per id. A value that is not in the wire format,
names an id the registry does not know, or does not decode stops the command with the
record's partition and offset and the reason (exit 1), as Confluent's console consumers do.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from logformat.errors import ErrorCode, TierlogError
from schemaformat.registry_client import RegistryClient, RegistryError
from schemaformat.wire import WireFormatError, decode, unframe
from tierlog.cli.schemas_cmd import add_registry_url, registry_client
from tierlog.client import ConsumerRecord

SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json-sr": "JSON"}
Printer = Callable[[ConsumerRecord], bytes]


def add_value_format(q: argparse.ArgumentParser) -> None:
    q.add_argument(
        "--value-format",
        choices=("raw", *SCHEMA_TYPES),
        default="raw",
        help="decode values written by a Schema Registry serializer (Avro, Protobuf, JSON "
        "Schema) to JSON through the registry (default raw: the bytes as they are)",
    )
    add_registry_url(q)


def decoding_printer(
    printer: Printer, args: argparse.Namespace
) -> tuple[Printer, Callable[[], None]]:
    """`printer` with each value decoded first, and what closes the registry client."""
    if args.value_format == "raw":
        return printer, lambda: None
    client = registry_client(args)
    expected = SCHEMA_TYPES[args.value_format]

    def decoded(record: ConsumerRecord) -> bytes:
        if record.value is None:
            return printer(record)
        value = json.dumps(_decode(client, record, expected), ensure_ascii=False)
        return printer(record._replace(value=value.encode()))

    return decoded, client.close


def _decode(client: RegistryClient, record: ConsumerRecord, expected: str) -> object:
    where = f"partition {record.partition} offset {record.offset}"
    try:
        framed = unframe(record.value or b"")
        schema = client.schema(framed.schema_id)
        if schema.schema_type != expected:
            message = f"schema {framed.schema_id} is {schema.schema_type}, not {expected}"
            raise TierlogError(ErrorCode.INVALID_RECORD, f"{where}: {message} (--value-format)")
        return decode(schema, framed.body).value
    except WireFormatError as error:
        raise TierlogError(ErrorCode.CORRUPT_MESSAGE, f"{where}: {error}") from None
    except RegistryError as error:
        message = f"{where}: the registry cannot give its schema: {error}"
        raise TierlogError(ErrorCode.INVALID_RECORD, message) from None
