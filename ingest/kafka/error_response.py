"""A whole-request error answer in the request's own version (Kafka's getErrorResponse).

A request we will not serve (a version outside what ApiVersions offered) still gets an
answer the client can parse: the response type of the same API and version, with the error
in its top-level error code and, where the response is organised by topic, partition,
resource or key, in every entry the request named. The entries are mirrored from the
request by walking both kio types side by side, so one function answers every API.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, fields, is_dataclass
from typing import TypeVar

from kio.index import UnknownAPIKey, UnknownEntity
from kio.schema.errors import ErrorCode as KafkaError

# kio's own field introspection (how its readers and writers see a type), private but pinned
# (kio==0.6.5 in pyproject.toml); tests/unit/.../test_kafka_error_response.py encodes an
# error answer for every version of every served API, so a kio change that breaks it shows.
from kio.serial._implicit_defaults import get_implicit_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)
from kio.static.protocol import Entity

from ingest.kafka.protocol import (
    SUPPORTED,
    ProtocolError,
    RequestHeader,
    decode_body,
    encode_response,
    response_type,
)

# Response arrays that list the request's entries -> the request arrays they mirror. Other
# arrays (brokers, configs, aborted transactions...) stay empty: an error reports no data.
_ARRAYS: dict[str, tuple[str, ...]] = {
    "topics": ("topics",),
    "responses": ("topics", "topic_data", "resources", "topic_names"),
    "results": ("resources", "topics"),
    "partitions": ("partitions", "partition_indexes"),
    "partition_responses": ("partition_data",),
    "groups": ("groups",),
    "coordinators": ("coordinator_keys",),
    "members": ("members",),
}
_UNKNOWN_INT = ("offset", "epoch", "_id", "watermark")
# Fields that name an entry, copied from the request entry: response name -> request names.
_KEYS: dict[str, tuple[str, ...]] = {
    "name": ("name", "topic"),
    "topic": ("topic", "name"),
    "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition", "index"),
    "partition": ("partition", "partition_index"),
    "index": ("index", "partition_index"),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
    "group_id": ("group_id",),
    "member_id": ("member_id",),
    "group_instance_id": ("group_instance_id",),
    "key": ("key",),
}


E = TypeVar("E", bound=Entity)


def error_response(response_cls: type[E], request: object, error: KafkaError, message: str) -> E:
    """`response_cls` filled as an answer of `error` to every entry of `request`."""
    return _entity(response_cls, request, error, message)


def _entity(cls: type[E], source: object, error: KafkaError, message: str) -> E:
    own = fields(cls)
    values = {f.name: _value(f, source, error, message) for f in own}
    if source is not None and not is_dataclass(source):  # a bare name or index
        values[own[0].name] = source
    return cls(**values)


def _mirrored(f: Field[object], source: object) -> tuple[object, ...]:
    if source is None or not is_dataclass(source) or "tag" in f.metadata:
        return ()
    for name in _ARRAYS.get(f.name, ()):
        items = getattr(source, name, None)
        if isinstance(items, tuple):
            return items
    return ()


def _value(f: Field[object], source: object, error: KafkaError, message: str) -> object:
    kind = classify_field(f)
    if f.metadata.get("kafka_type") == "error_code":
        return error
    if f.name.endswith("error_message") and is_optional(f):
        return message
    if isinstance(kind, EntityTupleField):
        return tuple(_entity(kind.type_, item, error, message) for item in _mirrored(f, source))
    if isinstance(kind, EntityField):
        return _entity(kind.type_, None, error, message)
    if isinstance(kind, PrimitiveTupleField):
        return ()
    if source is not None and is_dataclass(source):
        for name in _KEYS.get(f.name, ()):
            if hasattr(source, name):
                return getattr(source, name)
    if f.default is not MISSING:
        return f.default
    if is_optional(f):
        return None
    if f.name.endswith(_UNKNOWN_INT) and f.metadata.get("kafka_type", "").startswith("int"):
        return -1  # Kafka's "none": no offset, epoch, node or producer in an error answer
    return get_implicit_default(kind.type_)


def answer_unsupported(header: RequestHeader, frame: bytes) -> bytes:
    """UNSUPPORTED_VERSION in the request's own version, or ProtocolError when kio has no
    schema for that version (then no answer could be parsed: the connection closes)."""
    lo, hi = SUPPORTED.get(header.api_key, (0, -1))
    served = f"versions {lo}-{hi}" if lo <= hi else "no version"
    message = (
        f"API key {header.api_key} version {header.api_version} is not supported; this broker "
        f"serves {served} (see ApiVersions)"
    )
    try:
        response_cls = response_type(header)
    except (UnknownEntity, UnknownAPIKey):
        raise ProtocolError(f"{message}, and it has no schema to answer that version in") from None
    request = decode_body(header, frame)
    body = error_response(response_cls, request, KafkaError.unsupported_version, message)
    return encode_response(header, body)
