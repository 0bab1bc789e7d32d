"""Kafka RecordBatch v2 bytes for tests: batches resealed with another codec, body or base
timestamp (CRC and length kept valid), compressed streams, and header bombs."""

from __future__ import annotations

import struct

import google_crc32c
import pyarrow as pa

from ingest.kafka.record_batch import HEADER_SIZE, encode_batch
from logformat.schema import CONSUMER_SCHEMA

NOW = 1_800_000_000_000


def small_batch(rows: int = 1, headers: list[dict[str, object]] | None = None) -> bytes:
    recs = [
        {"offset": i, "timestamp": NOW, "key": b"k", "value": b"v", "headers": headers}
        for i in range(rows)
    ]
    return encode_batch(pa.RecordBatch.from_pylist(recs, schema=CONSUMER_SCHEMA), 0, rows)


def reseal(
    batch: bytes, codec: int = 0, body: bytes | None = None, base_ts: int | None = None
) -> bytes:
    """The batch with another codec / records body / base timestamp, its CRC and length valid."""
    head = bytearray(batch[:HEADER_SIZE])
    (attrs,) = struct.unpack_from(">h", head, 21)
    struct.pack_into(">h", head, 21, attrs | codec)
    if base_ts is not None:
        struct.pack_into(">q", head, 27, base_ts)
    records = batch[HEADER_SIZE:] if body is None else body
    struct.pack_into(">i", head, 8, HEADER_SIZE - 12 + len(records))
    out = bytes(head) + records
    crc = google_crc32c.value(out[21:])
    return out[:17] + struct.pack(">I", crc) + out[21:]


def compressed(codec: str, data: bytes) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, codec) as out:
        out.write(data)
    return bytes(sink.getvalue().to_pybytes())


def header_bomb(records: int, headers: int) -> bytes:
    """`records` records of `headers` empty headers each (key "", value null): 2 bytes each."""
    rec = b"\x00" + b"\x00" + b"\x00" + b"\x02k" + b"\x02v"  # attrs, ts, offset delta, key, value
    out = b""
    for i in range(records):
        count = varint(headers)
        body = rec[:2] + varint(i) + rec[3:] + count + b"\x00\x01" * headers
        out += varint(len(body)) + body
    return reseal(small_batch(records), body=out)


def varint(v: int) -> bytes:
    z, out = (v << 1) ^ (v >> 63), b""
    while z >= 0x80:
        out += bytes([(z & 0x7F) | 0x80])
        z >>= 7
    return out + bytes([z])
