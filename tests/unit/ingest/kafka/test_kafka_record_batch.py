"""RecordBatch v2 <-> tierlog batches: exact round trips, and bad batches refused whole."""

from __future__ import annotations

import gzip
import struct

import google_crc32c
import pyarrow as pa
import pytest

from ingest.kafka.record_batch import HEADER_SIZE, decode_batch, encode_batch
from logformat.errors import ErrorCode, TierlogError
from logformat.schema import CONSUMER_SCHEMA

LIMIT = 1 << 20


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
    decoded = decode_batch(encode_batch(batch, 0, 40), LIMIT, 1000)
    assert decoded.producer_id == -1
    got = decoded.records
    assert got.column(0).to_pylist() == list(range(40))
    for name in ("timestamp", "key", "value", "headers"):
        assert got.column(name).to_pylist() == batch.column(name).to_pylist(), name


def test_gzip_batch_decodes() -> None:
    plain = encode_batch(_consumer_batch(5), 0, 5)
    packed = _reseal(plain, 1, gzip.compress(plain[HEADER_SIZE:]))
    got = decode_batch(packed, LIMIT, 1000).records
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
        (lambda b: _reseal(b, 0x10), ErrorCode.INVALID_RECORD),  # transactional
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
        decode_batch(damage(good), LIMIT, 1000)
    assert err.value.code is code


def test_limits_bound_records_and_decompressed_bytes() -> None:
    good = encode_batch(_consumer_batch(4), 0, 4)
    with pytest.raises(TierlogError) as err:
        decode_batch(good, LIMIT, 3)
    assert err.value.code is ErrorCode.INVALID_RECORD
    bomb = _reseal(good, 1, gzip.compress(b"\0" * (4 * LIMIT)))
    with pytest.raises(TierlogError) as err:
        decode_batch(bomb, LIMIT, 1000)
    assert err.value.code is ErrorCode.RECORD_LIST_TOO_LARGE


def test_header_keys_must_be_text() -> None:
    batch = _consumer_batch(2)
    raw = encode_batch(batch, 0, 2)
    bad = raw.replace("é".encode(), b"\xff\xfe")
    with pytest.raises(TierlogError) as err:
        decode_batch(_reseal(bad), LIMIT, 1000)
    assert err.value.code is ErrorCode.INVALID_RECORD
