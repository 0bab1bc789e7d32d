"""Kafka RecordBatch v2 <-> tierlog record batches (logformat/schema.py), both ways.

Kafka's batch is a header (offsets, timestamps, producer id/epoch/sequence, CRC-32C) over
varint-framed records; tierlog keeps the same fields as Arrow columns. Keys, values, header
keys and values, timestamps and offsets are carried unchanged, so a record round-trips
byte-exact between the two protocols. The varint framing has to be walked record by record
(there is no columnar form of it); everything else is done per column.
"""

from __future__ import annotations

import contextlib
import struct
from typing import NamedTuple

import google_crc32c
import pyarrow as pa

from ingest.kafka.compression import decompress
from logformat.errors import ErrorCode, TierlogError
from logformat.schema import HEADERS, RECORD_SCHEMA, TIMESTAMP

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, record count
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_CRC_START = 21  # the CRC covers attributes .. the end of the batch
_TRANSACTIONAL, _CONTROL, _LOG_APPEND_TIME = 0x10, 0x20, 0x08


class KafkaBatch(NamedTuple):
    records: pa.RecordBatch  # RECORD_SCHEMA, offset_delta 0..n-1
    producer_id: int  # -1: not an idempotent producer
    producer_epoch: int
    base_sequence: int
    decoded_bytes: int  # the records' size after decompression


def _corrupt(why: str) -> TierlogError:
    return TierlogError(ErrorCode.CORRUPT_MESSAGE, f"record batch: {why}")


def _read_long_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _corrupt("truncated or overlong varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """(zigzag varint at pos, the position after it). One- and two-byte varints (lengths,
    deltas) take the short path: this runs several times per record."""
    try:
        b = data[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        c = data[pos + 1]
        if c < 0x80:
            v = (b & 0x7F) | (c << 7)
            return (v >> 1) ^ -(v & 1), pos + 2
    except IndexError:
        raise _corrupt("truncated varint") from None
    return _read_long_varint(data, pos)


def _read_nullable(data: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _read_varint(data, pos)
    if n == -1:
        return None, pos
    end = pos + n
    if n < 0 or end > len(data):
        raise _corrupt("a length runs past the end of the batch")
    return data[pos:end], end


def _header_key(raw: bytes | None) -> str:
    if raw is not None:
        with contextlib.suppress(UnicodeDecodeError):
            return raw.decode()
    raise TierlogError(ErrorCode.INVALID_RECORD, "a record header key must be UTF-8 text")


def _headers(data: bytes, pos: int, n: int) -> tuple[list[tuple[str, bytes | None]], int]:
    out = []
    for _ in range(n):
        name, pos = _read_nullable(data, pos)
        value, pos = _read_nullable(data, pos)
        out.append((_header_key(name), value))
    return out, pos


def _records(data: bytes, count: int, base_ts: int) -> pa.RecordBatch:
    timestamps: list[int] = [0] * count
    keys: list[bytes | None] = [None] * count
    values: list[bytes | None] = [None] * count
    headers: list[list[tuple[str, bytes | None]] | None] = [None] * count
    pos = 0
    for i in range(count):
        length, pos = _read_varint(data, pos)
        end = pos + length
        ts_delta, pos = _read_varint(data, pos + 1)  # after the record attributes (unused in v2)
        timestamps[i] = base_ts + ts_delta
        offset_delta, pos = _read_varint(data, pos)
        if offset_delta != i:
            raise TierlogError(ErrorCode.INVALID_RECORD, "record offset deltas must be 0..n-1")
        keys[i], pos = _read_nullable(data, pos)
        values[i], pos = _read_nullable(data, pos)
        n_headers, pos = _read_varint(data, pos)
        if n_headers:
            headers[i], pos = _headers(data, pos, n_headers)
        if pos != end:
            raise _corrupt(f"record {i}'s length does not match its fields")
    if pos != len(data):
        raise _corrupt("bytes left over after the last record")
    return pa.RecordBatch.from_arrays(
        [
            pa.array(range(count), pa.int32()),
            pa.array(timestamps, TIMESTAMP),
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.nulls(count, HEADERS)
            if headers.count(None) == count
            else pa.array(headers, HEADERS),
        ],
        schema=RECORD_SCHEMA,
    )


def decode_batch(data: bytes, max_decoded_bytes: int, max_records: int) -> KafkaBatch:
    """The one RecordBatch v2 of a produce request's partition (Kafka: exactly one from
    Produce v3 on). Anything malformed raises before a record is handed on."""
    if len(data) < HEADER_SIZE:
        raise _corrupt(f"{len(data)} bytes is shorter than a batch header ({HEADER_SIZE})")
    (_, length, _, magic, crc, attrs, last_delta, base_ts, _, pid, epoch, seq, count) = (
        _HEADER.unpack_from(data)
    )
    if magic != 2:
        raise _corrupt(f"magic {magic}: only RecordBatch v2 is supported")
    if length + 12 != len(data):
        raise _corrupt("the batch length does not match the partition's record bytes")
    if google_crc32c.value(data[_CRC_START:]) != crc:
        raise _corrupt("CRC-32C mismatch")
    if attrs & (_TRANSACTIONAL | _CONTROL):
        raise TierlogError(
            ErrorCode.INVALID_RECORD, "transactional and control batches are not supported"
        )
    if not 0 < count <= max_records or last_delta != count - 1:
        raise TierlogError(
            ErrorCode.INVALID_RECORD,
            f"a batch must hold 1..{max_records} records with lastOffsetDelta = count - 1",
        )
    body = data[HEADER_SIZE:]
    codec = attrs & 0x07
    if codec:
        body = decompress(codec, body, max_decoded_bytes)
    elif len(body) > max_decoded_bytes:
        raise TierlogError(ErrorCode.RECORD_LIST_TOO_LARGE, "the batch exceeds the broker limit")
    return KafkaBatch(_records(body, count, base_ts), pid, epoch, seq, len(body))


# -- tierlog -> Kafka ---------------------------------------------------------------------


def _zigzag(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


# Lengths and deltas are mostly small: their encodings are looked up, not computed.
_SMALL = [_zigzag(v) for v in range(1 << 14)]
_NULL = _zigzag(-1)


def _vint(value: int) -> bytes:
    return _SMALL[value] if 0 <= value < 16384 else _zigzag(value)


def _record(
    offset_delta: int,
    ts_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[dict[str, object]] | None,
) -> bytes:
    parts = [b"\x00", _vint(ts_delta), _vint(offset_delta)]  # attributes, then the deltas
    parts += (_NULL,) if key is None else (_vint(len(key)), key)
    parts += (_NULL,) if value is None else (_vint(len(value)), value)
    parts.append(_vint(len(headers or ())))
    for h in headers or ():
        name = str(h["key"]).encode()
        raw = h["value"]
        parts += (_vint(len(name)), name)
        parts += (_vint(len(raw)), raw) if isinstance(raw, bytes) else (_NULL,)
    body = b"".join(parts)
    return _vint(len(body)) + body


def encode_batch(
    batch: pa.RecordBatch, first: int, next_offset: int, log_append_time: bool = False
) -> bytes:
    """One uncompressed RecordBatch v2 of a fetch result that read [first, next_offset)
    (CONSUMER_SCHEMA: absolute offsets, with gaps on a compacted topic). lastOffsetDelta
    reaches next_offset - 1, so a consumer moves past offsets compaction removed, even when
    no record is left (a batch with no records, as Kafka's cleaner leaves them)."""
    n = batch.num_rows
    if next_offset <= first:
        return b""
    offsets = batch.column(0).to_pylist()
    stamps = batch.column(1).cast(pa.int64()).to_pylist()
    keys, values = batch.column(2).to_pylist(), batch.column(3).to_pylist()
    headers = batch.column(4).to_pylist()
    base = offsets[0] if n else first
    base_ts = stamps[0] if n else -1
    body = b"".join(
        map(
            _record,
            [o - base for o in offsets],
            [t - base_ts for t in stamps],
            keys,
            values,
            headers,
        )
    )
    attrs = _LOG_APPEND_TIME if log_append_time else 0
    max_ts = max(stamps) if n else -1
    last_delta = next_offset - 1 - base
    tail = struct.pack(">hiqqqhii", attrs, last_delta, base_ts, max_ts, -1, -1, -1, n) + body
    crc = google_crc32c.value(tail)
    return struct.pack(">qiibI", base, len(tail) + 9, -1, 2, crc) + tail
