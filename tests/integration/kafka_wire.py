"""Raw Kafka requests over a socket, for tests of what real clients never send (bad frames,
exact versions) or of answers they do not show (throttle times)."""

from __future__ import annotations

import importlib
import io
import socket
import struct
from datetime import timedelta
from typing import Any

from kio.schema.fetch.v8.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v8.response import FetchResponse
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

FLEXIBLE = {(18, 3), (0, 9), (3, 12)}  # the (api key, version) pairs these tests send flexible


def request(api_key: int, version: int, body: bytes, correlation: int = 7) -> bytes:
    """A request frame with header v1 (client id "t"), and v2's empty tags when flexible."""
    head = struct.pack(">hhih", api_key, version, correlation, 1) + b"t"
    frame = head + (b"\0" if (api_key, version) in FLEXIBLE else b"") + body
    return struct.pack(">i", len(frame)) + frame


def read_frame(s: socket.socket) -> bytes:
    """One response frame, or b"" when the broker closed the connection."""
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            return b""
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = b""
    while len(body) < size:
        chunk = s.recv(size - len(body))
        if not chunk:
            return b""
        body += chunk
    return body


def call(bootstrap: str, raw: bytes) -> bytes:
    """The response frame to `raw` on a new connection, or b"" when the broker closed it."""
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)  # all sent: a truncated frame is a client hanging up
        return read_frame(s)


def encode(body: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


def _produce_schema(version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.produce.v{version}.{kind}")


def produce_request(topic: str, records: bytes, acks: int = -1, version: int = 7) -> bytes:
    """One Produce request (v3-v8: the same fields) of `records` to partition 0."""
    schema = _produce_schema(version, "request")
    req = schema.ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=timedelta(seconds=5),
        topic_data=(
            schema.TopicProduceData(
                name=topic,
                partition_data=(schema.PartitionProduceData(index=i32(0), records=records),),
            ),
        ),
    )
    return request(0, version, encode(req))


def produce_response(frame: bytes, version: int = 7) -> Any:
    resp, _ = entity_reader(_produce_schema(version, "response").ProduceResponse)(frame, 4)
    return resp


def produce_raw(bootstrap: str, topic: str, records: bytes) -> Any:
    """One Produce v7 request (acks=all) of `records` to partition 0; its partition answer."""
    resp = produce_response(call(bootstrap, produce_request(topic, records)))
    return resp.responses[0].partition_responses[0]


def fetch_request(topic: str, offset: int, max_wait_ms: int, correlation: int = 7) -> bytes:
    """One Fetch v8 request (the first version whose clients back off by throttle time)."""
    req = FetchRequest(
        replica_id=i32(-1),
        max_wait=timedelta(milliseconds=max_wait_ms),
        min_bytes=i32(1),
        max_bytes=i32(1 << 20),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(
                        partition=i32(0),
                        fetch_offset=i64(offset),
                        log_start_offset=i64(-1),
                        partition_max_bytes=i32(1 << 20),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    return request(1, 8, encode(req), correlation)


def fetch_response(frame: bytes) -> FetchResponse:
    resp, _ = entity_reader(FetchResponse)(frame, 4)
    return resp


def api_versions_ok(bootstrap: str) -> None:
    resp = call(bootstrap, request(18, 0, b""))
    assert resp[:4] == struct.pack(">i", 7) and resp[4:6] == b"\0\0"  # correlation, no error
