"""The records of a Kafka RecordBatch v2 (its varint-framed body) <-> Arrow columns.

    record: length, attributes (int8, unused), timestampDelta (varlong), offsetDelta,
            key length, key, value length, value, header count,
            per header: key length, key, value length, value      (lengths -1: null)

Decoding walks the records once in Python to find where each starts (each begins with its
length), then reads every field of every record at once (varint_columns.py). Encoding packs
the varints of all records with numpy and joins them with the key and value columns in
Arrow's C++ (binary_join_element_wise). Keys, values and headers are carried byte for byte.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.data_limits import DEFAULT_LIMITS, DataLimits
from ingest.kafka import varint_columns as vc
from ingest.kafka.varint_columns import INT_WIDTH, LONG_WIDTH, Bytes, Ints
from ingest.service.headers import check_headers
from ingest.service.timestamps import combine
from logformat.errors import ErrorCode, TierlogError
from logformat.schema import HEADER_STRUCT, HEADERS, RECORD_SCHEMA, TIMESTAMP

_EMPTY = pa.scalar(b"", pa.binary())
_NO_HEADERS = pa.scalar(b"\x00", pa.binary())  # a header count of 0


def corrupt(why: str) -> TierlogError:
    return TierlogError(ErrorCode.CORRUPT_MESSAGE, f"record batch: {why}")


def _long_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise corrupt("truncated or overlong varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def _zigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


# How far a record starting with a one- or two-byte length varint reaches (varint + length),
# by its first byte, or by its first two bytes (None: the varint is longer): looked up in
# the walk, which is the one per-record loop in Python.
_REACH_1 = [1 + _zigzag(b) for b in range(0x80)]
_REACH_2: list[int | None] = [None] * (1 << 16)
for _b in range(0x80, 0x100):
    for _c in range(0x80):
        _REACH_2[(_b << 8) | _c] = 2 + _zigzag((_b & 0x7F) | (_c << 7))


def _bounds(data: bytes, count: int) -> Ints:
    """Where each record starts, then where the last ends: the one walk in Python, one
    varint per record (one or two bytes but for records of 8 KiB and more)."""
    out = [0] * (count + 1)
    pos = 0
    reach_1, reach_2 = _REACH_1, _REACH_2
    try:
        for i in range(1, count + 1):
            b = data[pos]
            if b < 0x80:
                pos += reach_1[b]
            elif (step := reach_2[(b << 8) | data[pos + 1]]) is not None:
                pos += step
            else:
                n, after = _long_varint(data, pos)
                pos = after + n
            out[i] = pos
    except IndexError:
        raise corrupt("a record runs past the end of the batch") from None
    bounds = np.array(out, np.int64)
    if (bounds[1:] <= bounds[:-1]).any():  # a negative length walked backwards
        raise corrupt("a record length is negative")
    if bounds[-1] != len(data):
        raise corrupt("bytes left over after the last record")
    return bounds


def _read(buf: Bytes, pos: Ints, width: int) -> tuple[Ints, Ints]:
    try:
        return vc.read(buf, pos, width)
    except vc.VarintError as exc:
        raise corrupt(str(exc)) from None


def _string(buf: Bytes, pos: Ints, ends: Ints) -> tuple[Ints, Ints, Ints]:
    """(lengths, starts, positions after) of the length-prefixed strings at `pos`."""
    lengths, size = _read(buf, pos, INT_WIDTH)
    starts = pos + size
    after = starts + np.maximum(lengths, 0)
    if (lengths < -1).any() or (after > ends).any():
        raise corrupt("a length runs past the end of its record")
    return lengths, starts, after


_FEW = 8  # header indexes read a column at a time; the rest of each record's are walked
_VALUE_1 = [_zigzag(b) for b in range(0x80)]  # one-byte varints, by their byte


def _header_walk(data: bytes, at: int, n: int, out: list[tuple[int, int, int, int]]) -> int:
    """The next `n` headers of one record, one by one (for records with many: a vectorised
    pass per header index would cost a numpy round per index). A one-byte length, the usual
    case, is a table lookup; the walk is bounded by the header limits checked before it."""
    value_1 = _VALUE_1
    try:
        for _ in range(n):
            b = data[at]
            if b < 0x80:
                k, at = value_1[b], at + 1
            else:
                k, at = _long_varint(data, at)
            key_at = at
            at += k if k > 0 else 0
            b = data[at]
            if b < 0x80:
                v, at = value_1[b], at + 1
            else:
                v, at = _long_varint(data, at)
            out.append((k, key_at, v, at))
            at += v if v > 0 else 0
    except IndexError:
        raise corrupt("a header runs past the end of the batch") from None
    return at


def _headers(data: bytes, buf: Bytes, pos: Ints, ends: Ints, counts: Ints) -> tuple[pa.Array, Ints]:
    """The headers column, and each record's position after its headers."""
    if (counts < 0).any() or (2 * counts > ends - pos).any():  # a header takes 2+ bytes
        raise corrupt("a header count does not fit its record")
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    fields = np.zeros((4, int(offsets[-1])), np.int64)  # key length, key at, value ...
    pos = pos.copy()
    for j in range(int(counts.max())):
        rows = np.flatnonzero(counts > j)
        if j >= _FEW:
            for r in rows.tolist():
                walked: list[tuple[int, int, int, int]] = []
                pos[r] = _header_walk(data, int(pos[r]), int(counts[r]) - j, walked)
                fields[:, offsets[r] + j : offsets[r + 1]] = np.array(walked, np.int64).T
            if (pos[rows] > ends[rows]).any():
                raise corrupt("a header runs past the end of its record")
            break
        slots = offsets[rows] + j
        fields[0, slots], fields[1, slots], at = _string(buf, pos[rows], ends[rows])
        fields[2, slots], fields[3, slots], pos[rows] = _string(buf, at, ends[rows])
    if (fields[2] < -1).any():
        raise corrupt("a header value length below -1")
    if (fields[0] < 0).any():
        raise TierlogError(ErrorCode.INVALID_RECORD, "a record header key must be UTF-8 text")
    try:
        keys = vc.strings(buf, fields[1], fields[0]).cast(pa.string())
    except pa.ArrowInvalid:
        raise TierlogError(
            ErrorCode.INVALID_RECORD, "a record header key must be UTF-8 text"
        ) from None
    entries = pa.StructArray.from_arrays(
        [keys, vc.strings(buf, fields[3], fields[2])], fields=list(HEADER_STRUCT)
    )
    column = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()), entries, type=HEADERS, mask=pa.array(counts == 0)
    )
    return column, pos


def decode_records(
    data: bytes, count: int, base_ts: int, limits: DataLimits = DEFAULT_LIMITS
) -> pa.RecordBatch:
    """RECORD_SCHEMA rows of the `count` records in `data`; anything malformed, a time that
    leaves the range, or headers over the broker's bounds (checked from each record's
    header count and the bytes it has left, before any header is read) raises."""
    bounds = _bounds(data, count)
    starts, ends = bounds[:-1], bounds[1:]
    buf = vc.padded(data)
    length, size = _read(buf, starts, INT_WIDTH)
    if (length < 0).any() or (starts + size + length != ends).any():
        raise corrupt("a record length is not where its record ends")
    pos = starts + size + 1  # past the record attributes (unused in v2)
    ts_delta, size = _read(buf, pos, LONG_WIDTH)
    stamps = combine(base_ts, ts_delta)
    offset_delta, size2 = _read(buf, pos + size, INT_WIDTH)
    if not np.array_equal(offset_delta, np.arange(count)):
        raise TierlogError(ErrorCode.INVALID_RECORD, "record offset deltas must be 0..n-1")
    key_len, key_at, pos = _string(buf, pos + size + size2, ends)
    value_len, value_at, pos = _string(buf, pos, ends)
    counts, size = _read(buf, pos, INT_WIDTH)
    pos = pos + size
    headers = pa.nulls(count, HEADERS)
    if counts.any():
        if (counts < 0).any():
            raise corrupt("a header count is negative")
        check_headers(counts, np.where(counts > 0, ends - pos, 0), limits)
        headers, pos = _headers(data, buf, pos, ends, counts)
    if (pos != ends).any():
        raise corrupt(f"record {int(np.argmax(pos != ends))}'s length does not match its fields")
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.arange(count, dtype=np.int32)),
            pa.array(stamps, TIMESTAMP),
            vc.strings(buf, key_at, key_len),
            vc.strings(buf, value_at, value_len),
            headers,
        ],
        schema=RECORD_SCHEMA,
    )


# -- Arrow -> Kafka -----------------------------------------------------------------------


def _lengths(column: pa.Array) -> Ints:
    """Byte lengths, -1 for null (Kafka's null)."""
    return np.asarray(pc.binary_length(column).fill_null(-1).to_numpy(), np.int64)


def _bytes_of(column: pa.Array) -> pa.Array:
    return column.fill_null(_EMPTY) if column.null_count else column


def _header_bytes(headers: pa.Array, counts: Ints) -> pa.Array:
    """Per record, its headers encoded one after another."""
    keys, values = headers.flatten().flatten()
    keys = keys.cast(pa.binary())
    entries = pc.binary_join_element_wise(
        vc.packed([_lengths(keys)]),
        keys,
        vc.packed([_lengths(values)]),
        _bytes_of(values),
        _EMPTY,
    )
    offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), entries), _EMPTY)


def encode_records(batch: pa.RecordBatch, base_offset: int, base_ts: int) -> pa.Buffer:
    """The records of CONSUMER_SCHEMA `batch` (at least one row), deltas from the given
    base offset and timestamp, as one contiguous buffer."""
    n = batch.num_rows
    offset_delta = batch.column(0).to_numpy() - base_offset
    ts_delta = batch.column(1).cast(pa.int64()).to_numpy() - base_ts
    keys, values, headers = batch.column(2), batch.column(3), batch.column(4)
    key_len, value_len = _lengths(keys), _lengths(values)
    counts = np.asarray(pc.list_value_length(headers).fill_null(0).to_numpy(), np.int64)
    zeros = np.zeros(n, np.int64)  # the record attributes
    length = 1 + vc.sizes(ts_delta) + vc.sizes(offset_delta) + vc.sizes(key_len)
    length += np.maximum(key_len, 0) + vc.sizes(value_len) + np.maximum(value_len, 0)
    parts = [_bytes_of(keys), vc.packed([value_len]), _bytes_of(values)]
    if counts.any():
        blob = _header_bytes(headers, counts)
        length += vc.sizes(counts) + _lengths(blob)
        parts += [vc.packed([counts]), blob]
    else:
        length += 1
        parts.append(_NO_HEADERS)
    first = vc.packed([length, zeros, ts_delta, offset_delta, key_len])
    records = pc.binary_join_element_wise(first, *parts, _EMPTY)
    ends = np.frombuffer(records.buffers()[1], np.int32, n + 1, 4 * records.offset)
    return records.buffers()[2].slice(int(ends[0]), int(ends[-1] - ends[0]))
