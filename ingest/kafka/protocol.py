"""Kafka request/response framing over kio's generated message types.

kio (Aiven, Apache-2.0; generated from Kafka's own JSON message schemas) decodes request
bodies and encodes response bodies for every API version. This module adds what kio leaves
to the caller: the request header (whose version follows the body's flexibility), the
response header (v0 for ApiVersions always, KIP-511), and the table of what we serve.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import struct
import sys
from typing import NamedTuple, TypeVar, overload

from kio.index import load_request_schema as _load_request_schema
from kio.index import load_response_schema as _load_response_schema
from kio.schema.errors import ErrorCode as KafkaError
from kio.serial import entity_reader, entity_writer
from kio.static.protocol import Entity, RequestPayload, ResponsePayload

from logformat.errors import TierlogError

API_VERSIONS, METADATA, PRODUCE, FETCH, LIST_OFFSETS, INIT_PRODUCER_ID = 18, 3, 0, 1, 2, 22
CREATE_TOPICS, DELETE_TOPICS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 19, 20, 17, 36
FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP = 10, 11, 14, 12, 13
OFFSET_COMMIT, OFFSET_FETCH, OFFSET_FOR_LEADER_EPOCH = 8, 9, 23
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, CREATE_PARTITIONS, DESCRIBE_CLUSTER = 32, 44, 37, 60
LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 16, 15, 42, 47
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
DESCRIBE_LOG_DIRS, DESCRIBE_PRODUCERS = 35, 61
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
DELETE_RECORDS = 21
ALTER_USER_SCRAM_CREDENTIALS = 51
ELECT_LEADERS = 43
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
# What a connection may send before it authenticated, when auth is on.
BEFORE_AUTH = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})

# API key -> (min, max) version served: what librdkafka 2.x, kcat and kafka-python negotiate.
# Produce 3+ and Fetch 4+ carry RecordBatch v2 only; Fetch stops before 13 (topic ids).
# docs/kafka-apis.md is generated from this table (api_table.py): regenerate it on a change.
SUPPORTED: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 9),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 7),
    METADATA: (1, 12),
    API_VERSIONS: (0, 3),
    INIT_PRODUCER_ID: (0, 4),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 5),  # 6 names topics by id too
    DELETE_RECORDS: (0, 2),
    SASL_HANDSHAKE: (0, 1),  # 0: the SASL token follows bare, not in a Kafka request
    SASL_AUTHENTICATE: (0, 2),
    FIND_COORDINATOR: (0, 4),  # 4: a batch of keys
    JOIN_GROUP: (0, 7),  # 8+ carry KIP-848's reason fields only; 7 is what clients use
    SYNC_GROUP: (0, 5),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 4),  # 3+: a batch of members
    OFFSET_COMMIT: (2, 8),  # 9+ are KIP-848's member epochs
    OFFSET_FETCH: (1, 7),  # 8+ batch groups
    OFFSET_FOR_LEADER_EPOCH: (2, 4),  # librdkafka asks v2; 0-1 are gone from Kafka 4
    CREATE_PARTITIONS: (0, 3),
    DESCRIBE_CONFIGS: (1, 4),  # 0 is gone from Kafka 4
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    DESCRIBE_CLUSTER: (0, 2),
    LIST_GROUPS: (0, 5),
    DESCRIBE_GROUPS: (0, 5),  # 6 answers GROUP_ID_NOT_FOUND rather than Dead (KIP-1043)
    DELETE_GROUPS: (0, 2),
    ELECT_LEADERS: (0, 2),
    OFFSET_DELETE: (0, 0),
    DESCRIBE_ACLS: (1, 3),  # 0 (no pattern types) is gone from Kafka 4
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
    CONSUMER_GROUP_HEARTBEAT: (0, 1),
    CONSUMER_GROUP_DESCRIBE: (0, 1),
    DESCRIBE_LOG_DIRS: (1, 4),  # 0 is gone from Kafka 4
    DESCRIBE_PRODUCERS: (0, 0),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 1),
    DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),  # 2 adds a transactional id pattern (KIP-1152)
    ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ADD_PARTITIONS_TO_TXN: (0, 3),  # 4+ is the brokers' batch form (KIP-890)
    ADD_OFFSETS_TO_TXN: (0, 3),
    END_TXN: (0, 3),
    TXN_OFFSET_COMMIT: (0, 3),
}

_FIXED = struct.Struct(">hhi")  # api key, api version, correlation id


class ProtocolError(Exception):
    """The request cannot be answered in its own terms: the connection is closed."""


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_start: int  # where the body (or header v2's tagged fields) begins


def peek_header(frame: bytes) -> RequestHeader:
    """The fields every request header version starts with (client id included: it is a
    classic nullable string even in the flexible header v2)."""
    if len(frame) < _FIXED.size + 2:
        raise ProtocolError(f"a request of {len(frame)} bytes is shorter than its header")
    key, version, correlation = _FIXED.unpack_from(frame)
    (n,) = struct.unpack_from(">h", frame, _FIXED.size)
    start = _FIXED.size + 2
    if n > len(frame) - start:
        raise ProtocolError("the client id runs past the end of the request")
    client = None if n < 0 else frame[start : start + n].decode("utf-8", "replace")
    return RequestHeader(key, version, correlation, client, start + max(n, 0))


def supported(key: int, version: int) -> bool:
    lo, hi = SUPPORTED.get(key, (0, -1))
    return lo <= version <= hi


def _skip_tagged(frame: bytes, pos: int) -> int:
    def uvarint(at: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            if at >= len(frame) or shift > 28:
                raise ProtocolError("truncated tagged fields in the request header")
            b = frame[at]
            value |= (b & 0x7F) << shift
            at += 1
            if not b & 0x80:
                return value, at
            shift += 7

    count, pos = uvarint(pos)
    for _ in range(count):
        _, pos = uvarint(pos)
        size, pos = uvarint(pos)
        pos += size
    return pos


# kio resolves a schema from its dotted name on every call (pkgutil.resolve_name: ~5 us a
# request and another for its response; 2-3% of a broker's CPU under small transactional
# requests, py-spy). The (api key, version) pairs are few and their types never change.
@functools.cache
def load_request_schema(api_key: int, api_version: int) -> type[RequestPayload]:
    return _load_request_schema(api_key, api_version)


@functools.cache
def load_response_schema(api_key: int, api_version: int) -> type[ResponsePayload]:
    return _load_response_schema(api_key, api_version)


def decode_body(header: RequestHeader, frame: bytes) -> RequestPayload:
    """The request body as kio's type for (api key, version); ProtocolError if malformed."""
    schema = load_request_schema(header.api_key, header.api_version)
    pos = header.body_start
    if schema.__flexible__:
        pos = _skip_tagged(frame, pos)
    try:
        body: RequestPayload
        body, _ = entity_reader(schema)(frame, pos)
    except Exception as exc:  # kio raises several types for bad bytes; all mean the same here
        raise ProtocolError(f"malformed {schema.__name__} v{header.api_version}: {exc}") from None
    # Bytes after the body are ignored, as Kafka's own parser does: librdkafka 2.x sends a
    # few after a Metadata v12 body that asks for all topics.
    return body


def response_type(header: RequestHeader) -> type[ResponsePayload]:
    return load_response_schema(header.api_key, header.api_version)


# A handler serves every version of its API with one body of code: it is typed with the
# newest version's kio classes (the fields it reads are in every version it serves, or are
# read with getattr and a default), and builds its answer in the version asked for.
E = TypeVar("E", bound=Entity)


def build(cls: type[E], **values: object) -> E:
    """An instance of a kio type from the fields this version has (others are dropped), so
    one handler can answer every version of its API."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


@functools.cache
def _field_names(cls: type[Entity]) -> frozenset[str]:
    """A kio type's fields (build() runs per partition of a response: read them once)."""
    return frozenset(f.name for f in dataclasses.fields(cls))


@overload
def nested(response_cls: type[Entity], like: type[E]) -> type[E]: ...
@overload
def nested(response_cls: type[Entity], like: str) -> type[Entity]: ...
def nested(response_cls: type[Entity], like: type[E] | str) -> type[E] | type[Entity]:
    """The nested kio type named as `like` (the newest version's class, or its name) in the
    same version's module as `response_cls`."""
    name = like if isinstance(like, str) else like.__name__
    found: type[E] = getattr(sys.modules[response_cls.__module__], name)
    return found


def encode_response(header: RequestHeader, body: ResponsePayload) -> bytes:
    """The whole response frame: size, header (v1 with tagged fields when flexible, except
    ApiVersions), body."""
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(struct.pack(">i", header.correlation_id))
    if type(body).__flexible__ and header.api_key != API_VERSIONS:
        out.write(b"\0")  # no tagged fields
    entity_writer(type(body))(out, body)
    raw = out.getbuffer()
    struct.pack_into(">i", raw, 0, len(raw) - 4)
    return bytes(raw)


def kafka_error(exc: TierlogError) -> KafkaError:
    """tierlog's error names are Kafka's: the numeric code of the same name."""
    try:
        return KafkaError[exc.code.value.lower()]
    except KeyError:
        return KafkaError.unknown_server_error
