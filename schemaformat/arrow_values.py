"""Decoded values → Python values Arrow accepts for a column type (schemaformat/arrow_types.py).

`conform` walks a value and the type together and raises ValueError naming the field where
they disagree, so one bad record becomes one error string, never a failed batch. Values come
from fastavro (records as dicts, enums as symbols, logical types as datetime/Decimal/UUID),
from a Protobuf message (see `proto_value`), or from JSON (ISO strings for dates and times).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import uuid
from typing import Any

import pyarrow as pa
from google.protobuf.message import Message

from schemaformat.arrow_types import (
    JSON_TEXT,
    PROTO_JSON,
    PROTO_TIMESTAMP,
    PROTO_WRAPPERS,
    is_map,
    is_repeated,
)
from schemaformat.wire import jsonable

_INT64 = (-(2**63), 2**63 - 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def conform(value: Any, f: pa.Field, path: str = "") -> Any:
    """`value` as Arrow takes it for the field `f`; ValueError if it is not one."""
    if value is None:
        return None
    here = f"{path}.{f.name}" if path else f.name
    if f.metadata == JSON_TEXT:
        return json.dumps(jsonable(value), separators=(",", ":"), ensure_ascii=False)
    t = f.type
    if pa.types.is_struct(t):
        if not isinstance(value, dict):
            raise ValueError(f"{here}: expected a record, got {_kind(value)}")
        return {c.name: conform(value.get(c.name), c, here) for c in t}
    if pa.types.is_map(t):
        if not isinstance(value, dict):
            raise ValueError(f"{here}: expected a map, got {_kind(value)}")
        return [(k, conform(v, t.item_field, here)) for k, v in value.items()]
    if pa.types.is_list(t):
        if not isinstance(value, list | tuple):
            raise ValueError(f"{here}: expected an array, got {_kind(value)}")
        return [conform(v, t.value_field, here) for v in value]
    return _scalar(value, t, here)


def _scalar(value: Any, t: pa.DataType, here: str) -> Any:  # noqa: C901 (one case per type)
    if pa.types.is_string(t):
        if isinstance(value, uuid.UUID):
            return str(value)
        if isinstance(value, str):
            return value
    elif pa.types.is_int64(t):
        if isinstance(value, datetime.time):  # Avro time-millis/micros: microseconds of the day
            return (
                (value.hour * 60 + value.minute) * 60 + value.second
            ) * 10**6 + value.microsecond
        if isinstance(value, int) and not isinstance(value, bool):
            if not _INT64[0] <= value <= _INT64[1]:
                raise ValueError(f"{here}: {value} does not fit in 64 bits")
            return value
    elif pa.types.is_float64(t):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif pa.types.is_boolean(t):
        if isinstance(value, bool):
            return value
    elif pa.types.is_binary(t):
        if isinstance(value, bytes | bytearray):
            return bytes(value)
        if isinstance(value, str):  # JSON carries bytes as base64 (Protobuf's JSON mapping too)
            return base64.b64decode(value, validate=True)
    elif pa.types.is_decimal(t):
        if isinstance(value, int) and not isinstance(value, bool):
            value = decimal.Decimal(value)
        if isinstance(value, decimal.Decimal):
            return value
    elif pa.types.is_timestamp(t):
        if isinstance(value, str):
            value = _iso(value, datetime.datetime.fromisoformat, here)
        if isinstance(value, datetime.datetime):
            return value
    elif pa.types.is_date(t):
        if isinstance(value, str):
            value = _iso(value, datetime.date.fromisoformat, here)
        if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
            return value
    raise ValueError(f"{here}: expected {t}, got {_kind(value)} {_short(value)}")


def _iso(text: str, parse: Any, here: str) -> Any:
    try:
        return parse(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise ValueError(f"{here}: {text!r} is not an ISO 8601 date or time") from None


def _kind(value: Any) -> str:
    return {dict: "a record", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# -- Protobuf messages → dicts ------------------------------------------------------------------


def proto_value(message: Message) -> dict[str, Any]:
    """A message as a dict of its fields: unset sub-messages are None (absent), scalars
    their value (proto3's defaults included: that is what the producer's message holds),
    enums their names, Timestamps datetimes, wrappers their value."""
    out: dict[str, Any] = {}
    for fd in message.DESCRIPTOR.fields:
        raw = getattr(message, fd.name)
        if is_map(fd):
            value_fd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {k: _proto_single(value_fd, v) for k, v in raw.items()}
        elif is_repeated(fd):
            out[fd.name] = [_proto_single(fd, v) for v in raw]
        elif fd.message_type is not None and not message.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = _proto_single(fd, raw)
    return out


def _proto_single(fd: Any, raw: Any) -> Any:
    if fd.enum_type is not None:
        named = fd.enum_type.values_by_number.get(raw)
        return named.name if named is not None else str(raw)
    if fd.message_type is None:
        return raw
    full = fd.message_type.full_name
    if full == PROTO_TIMESTAMP:
        return _EPOCH + datetime.timedelta(seconds=raw.seconds, microseconds=raw.nanos // 1000)
    if full in PROTO_WRAPPERS:
        return raw.value
    if full in PROTO_JSON:
        from google.protobuf import json_format

        return json_format.MessageToDict(raw)
    return proto_value(raw)
