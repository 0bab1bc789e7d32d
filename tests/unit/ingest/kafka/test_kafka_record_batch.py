"""RecordBatch v2 <-> tierlog batches: exact round trips, and bad batches refused whole."""

from __future__ import annotations

import gzip
import struct
from typing import Any

import google_crc32c
import pyarrow as pa
import pytest

from ingest.kafka.record_batch import HEADER_SIZE, decode_batch, encode_batch
from logformat.errors import ErrorCode, TierlogError
from logformat.expansion import ExpansionLimits
from logformat.schema import CONSUMER_SCHEMA

LIMIT = 1 << 20


def _limits(decoded_bytes: int, records: int) -> ExpansionLimits:
    """Byte and record limits alone (no ratio cap: the bomb tests are in test_kafka_limits)."""
    return ExpansionLimits(records, decoded_bytes, float("inf"))


def _consumer_batch(n: int, first_offset: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [
            {
                "offset": first_offset + i,
                "timestamp": 1_700_000_000_000 + 7 * i,
                "key": None if i % 3 == 0 else bytes([i]) * i,
                "value": bytes(range(i % 256)),
                "headers": None
                if i % 2
                else [{"key": "é", "value": None}, {"key": "b", "value": b"\0"}],
            }
            for i in range(n)
        ],
        schema=CONSUMER_SCHEMA,
    )


def _reseal(batch: bytes, attrs_or: int = 0, body: bytes | None = None) -> bytes:
    """The batch with its attributes/records changed and a valid CRC and length again."""
    head = bytearray(batch[:HEADER_SIZE])
    (attrs,) = struct.unpack_from(">h", head, 21)
    struct.pack_into(">h", head, 21, attrs | attrs_or)
    records = batch[HEADER_SIZE:] if body is None else body
    struct.pack_into(">i", head, 8, HEADER_SIZE - 12 + len(records))
    out = bytes(head) + records
    crc = google_crc32c.value(out[21:])
    return out[:17] + struct.pack(">I", crc) + out[21:]


def test_round_trip_is_exact() -> None:
    batch = _consumer_batch(40)
    decoded = decode_batch(encode_batch(batch, 0, 40), _limits(LIMIT, 1000))
    assert decoded.producer_id == -1
    got = decoded.records
    assert got.column(0).to_pylist() == list(range(40))
    for name in ("timestamp", "key", "value", "headers"):
        assert got.column(name).to_pylist() == batch.column(name).to_pylist(), name


def test_gzip_batch_decodes() -> None:
    plain = encode_batch(_consumer_batch(5), 0, 5)
    packed = _reseal(plain, 1, gzip.compress(plain[HEADER_SIZE:]))
    got = decode_batch(packed, _limits(LIMIT, 1000)).records
    assert got.column("value").to_pylist() == _consumer_batch(5).column("value").to_pylist()


def test_compacted_gaps_and_empty_batches_advance_the_consumer() -> None:
    sparse = _consumer_batch(3, 10).filter(pa.array([True, False, True]))
    raw = encode_batch(sparse, 10, 20)
    base, _, _, _, _, _, last_delta = struct.unpack_from(">qiibIhi", raw)
    assert (base, last_delta) == (10, 9)  # the consumer goes on at 20
    empty = encode_batch(sparse.slice(0, 0), 5, 8)
    assert struct.unpack_from(">qiibIhi", empty)[::6] == (5, 2)
    assert encode_batch(sparse.slice(0, 0), 5, 5) == b""


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        (lambda b: b[:-1], ErrorCode.CORRUPT_MESSAGE),  # truncated
        (lambda b: b[:30], ErrorCode.CORRUPT_MESSAGE),  # shorter than a header
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), ErrorCode.CORRUPT_MESSAGE),  # wrong CRC
        (lambda b: b[:16] + b"\x01" + b[17:], ErrorCode.CORRUPT_MESSAGE),  # magic 1
        (lambda b: _reseal(b, 0x10), ErrorCode.INVALID_RECORD),  # transactional, no producer
        (lambda b: _reseal(b, 0x20), ErrorCode.INVALID_RECORD),  # control batch
        (lambda b: _reseal(b, 5), ErrorCode.CORRUPT_MESSAGE),  # unknown codec
        (lambda b: _reseal(b, 1), ErrorCode.CORRUPT_MESSAGE),  # "gzip" that is not
        (lambda b: _reseal(b, 0, b[HEADER_SIZE:-3]), ErrorCode.CORRUPT_MESSAGE),  # short record
    ],
)
def test_bad_batches_are_refused(damage: object, code: ErrorCode) -> None:
    good = encode_batch(_consumer_batch(4), 0, 4)
    assert callable(damage)
    with pytest.raises(TierlogError) as err:
        decode_batch(damage(good), _limits(LIMIT, 1000))
    assert err.value.code is code


def test_limits_bound_records_and_decompressed_bytes() -> None:
    good = encode_batch(_consumer_batch(4), 0, 4)
    with pytest.raises(TierlogError) as err:
        decode_batch(good, _limits(LIMIT, 3))
    assert err.value.code is ErrorCode.INVALID_RECORD
    bomb = _reseal(good, 1, gzip.compress(b"\0" * (4 * LIMIT)))
    with pytest.raises(TierlogError) as err:
        decode_batch(bomb, _limits(LIMIT, 1000))
    assert err.value.code is ErrorCode.MESSAGE_TOO_LARGE  # Kafka's RecordTooLargeException


def test_header_keys_must_be_text() -> None:
    batch = _consumer_batch(2)
    raw = encode_batch(batch, 0, 2)
    bad = raw.replace("é".encode(), b"\xff\xfe")
    with pytest.raises(TierlogError) as err:
        decode_batch(_reseal(bad), _limits(LIMIT, 1000))
    assert err.value.code is ErrorCode.INVALID_RECORD


def _zigzag(v: int) -> bytes:
    z, out = (v << 1) ^ (v >> 63), bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    return bytes(out + bytes([z]))


def _field(raw: bytes | None) -> bytes:
    return _zigzag(-1) if raw is None else _zigzag(len(raw)) + raw


def _kafka_records(rows: list[dict[str, Any]], base: int, base_ts: int) -> bytes:
    """Kafka's record layout written out plainly, one record at a time (the reference)."""
    out = b""
    for r in rows:
        headers = r["headers"] or []
        assert isinstance(headers, list)
        body = b"\0" + _zigzag(int(r["timestamp"]) - base_ts)
        body += _zigzag(int(r["offset"]) - base) + _field(r["key"]) + _field(r["value"])
        body += _zigzag(len(headers))
        body += b"".join(_field(h["key"].encode()) + _field(h["value"]) for h in headers)
        out += _zigzag(len(body)) + body
    return out


def _edge_rows() -> list[dict[str, Any]]:
    """Multi-byte varints everywhere: a 20 KB value, far timestamps, a record with 40
    headers, strings on both sides of BinaryView's 12-byte inline limit."""
    rows: list[dict[str, Any]] = []
    for i in range(300):
        rows.append(
            {
                "offset": 7 + i,
                "timestamp": 1_700_000_000_000 + (-(10**9) if i % 7 == 0 else i * 100_003),
                "key": [None, b"", b"k" * 12, b"k" * 13][i % 4],
                "value": b"v" * (20_000 if i == 5 else i % 30),
                "headers": [
                    {"key": f"h{j}", "value": None if j % 3 else b"x" * j} for j in range(40)
                ]
                if i == 9
                else ([{"key": "trace", "value": b"t" * (i % 15)}] if i % 2 else None),
            }
        )
    return rows


def test_multi_byte_varints_and_headers_match_kafkas_layout() -> None:
    rows = _edge_rows()
    batch = pa.RecordBatch.from_pylist(rows, schema=CONSUMER_SCHEMA)
    raw = encode_batch(batch, 7, 307)
    assert raw[HEADER_SIZE:] == _kafka_records(rows, 7, int(rows[0]["timestamp"]))
    got = decode_batch(raw, _limits(1 << 22, 1000)).records
    got.validate(full=True)
    assert got.column("offset_delta").to_pylist() == list(range(300))
    for name in ("timestamp", "key", "value", "headers"):
        assert got.column(name).to_pylist() == batch.column(name).to_pylist(), name


@pytest.mark.parametrize(
    ("record", "code"),
    [
        (b"\0\0\0" + _zigzag(-2) + _field(b"v") + b"\0", ErrorCode.CORRUPT_MESSAGE),  # key -2
        (b"\0\0\0" + _field(None) + _zigzag(50) + b"v\0", ErrorCode.CORRUPT_MESSAGE),  # value
        (b"\0\0\0" + _field(None) + _field(b"v") + _zigzag(9), ErrorCode.CORRUPT_MESSAGE),
        (b"\0\0\0" + _field(None) + _field(b"v") + b"\2" + _field(None) + _field(None), None),
        (b"\0\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\0", ErrorCode.CORRUPT_MESSAGE),  # varint
        (b"\0\0\2" + _field(None) + _field(b"v") + b"\0", ErrorCode.INVALID_RECORD),  # delta 1
    ],
)
def test_malformed_records_are_refused(record: bytes, code: ErrorCode | None) -> None:
    """Each record's fields are checked against its own length: nothing reads past it."""
    good = encode_batch(_consumer_batch(1), 0, 1)
    bad = _reseal(good, 0, _zigzag(len(record)) + record)
    with pytest.raises(TierlogError) as err:
        decode_batch(bad, _limits(LIMIT, 1000))
    assert err.value.code is (code or ErrorCode.INVALID_RECORD)  # a null header key
