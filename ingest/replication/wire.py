"""The internal replica-fetch exchange: small JSON metadata, frames as raw bytes.

Request (JSON): {"replica_id", "max_wait_ms", "max_bytes", "partitions": [{"topic",
"topic_id", "partition", "leader_epoch", "fetch_offset", "last_fetched_epoch"}]}.

Response (binary, so frames travel as the same bytes the leader stored, never re-encoded):
a little-endian u32 length, that many bytes of JSON {"partitions": [PartitionReply…]},
then each partition's frame bytes back to back, `length` bytes each, in the JSON's order.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import orjson

_LEN = struct.Struct("<I")


class FetchPartition(NamedTuple):
    topic: str
    topic_id: str
    partition: int
    leader_epoch: int  # the follower's view of the current leader epoch (fencing)
    fetch_offset: int  # the follower's log end offset
    last_fetched_epoch: int  # epoch of the follower's last frame, -1 if empty (KIP-320)


class PartitionReply(NamedTuple):
    topic: str
    partition: int
    error_code: str | None
    message: str | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    leader_epoch: int
    diverging_epoch: int  # -1 unless the follower must truncate first
    diverging_end_offset: int  # truncate to this offset when diverging_epoch >= 0
    length: int  # bytes of frames that follow for this partition


def encode_request(
    replica_id: int, max_wait_ms: int, max_bytes: int, parts: list[FetchPartition]
) -> bytes:
    return orjson.dumps(
        {
            "replica_id": replica_id,
            "max_wait_ms": max_wait_ms,
            "max_bytes": max_bytes,
            "partitions": [p._asdict() for p in parts],
        }
    )


def decode_request(body: bytes) -> tuple[int, int, int, list[FetchPartition]]:
    doc: dict[str, Any] = orjson.loads(body)
    parts = [FetchPartition(**p) for p in doc["partitions"]]
    return int(doc["replica_id"]), int(doc["max_wait_ms"]), int(doc["max_bytes"]), parts


def encode_response(replies: list[PartitionReply], payloads: list[bytes]) -> bytes:
    meta = orjson.dumps({"partitions": [r._asdict() for r in replies]})
    return b"".join([_LEN.pack(len(meta)), meta, *payloads])


def decode_response(body: bytes) -> list[tuple[PartitionReply, memoryview]]:
    (size,) = _LEN.unpack_from(body, 0)
    doc = orjson.loads(memoryview(body)[4 : 4 + size])
    view = memoryview(body)
    pos = 4 + size
    out = []
    for raw in doc["partitions"]:
        reply = PartitionReply(**raw)
        out.append((reply, view[pos : pos + reply.length]))
        pos += reply.length
    if pos != len(body):
        raise ValueError(f"replica fetch response has {len(body) - pos} stray bytes")
    return out
