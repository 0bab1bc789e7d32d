"""Expansion limits on produce bodies: a small request must not become a huge one in memory.

A zstd Arrow stream of a few KB can declare 50M rows or a GiB of zeros, a 24 MB JSON body of
`{}` is 8M records. Each body is measured before the work that grows with it:
- Arrow: the rows and decoded bytes its messages declare (logformat.ipc_metadata), checked
  against the limits before decompression; then batch by batch while decoding, counting
  what dictionary and view columns expand to once materialized;
- JSON: an upper bound of its records from a scan of the raw bytes, before parsing.
Too many records answers 413 RECORD_LIST_TOO_LARGE; too many bytes after decompression, or
a body that expands more than the ratio cap allows, 413 MESSAGE_TOO_LARGE.
"""

from __future__ import annotations

import re
import threading
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from logformat.errors import ErrorCode, TierlogError
from logformat.ipc_metadata import Declared, declared_size

RATIO_EXEMPT_BYTES = 1 << 20  # bodies that decode to less than this may expand freely


class ExpansionLimits(NamedTuple):
    max_records: int  # records per produce request
    max_decoded_bytes: int  # a request's size after decompression
    max_ratio: float  # decoded size / body size (beyond RATIO_EXEMPT_BYTES)


UNLIMITED = ExpansionLimits(2**62, 2**62, float("inf"))


def too_many_records(count: int, limits: ExpansionLimits, bound: str = "") -> TierlogError:
    return TierlogError(
        ErrorCode.RECORD_LIST_TOO_LARGE,
        f"the request holds {bound}{count} records; the broker takes at most "
        f"{limits.max_records} per request (--max-request-records)",
    )


def check_decoded(decoded: int, wire: int, limits: ExpansionLimits) -> None:
    """Refuse a request whose decoded size breaks the byte limit or the ratio cap."""
    if decoded > limits.max_decoded_bytes:
        raise TierlogError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"the request decodes to {decoded} bytes; the broker takes at most "
            f"{limits.max_decoded_bytes} (--max-request-decoded-bytes)",
        )
    if decoded > RATIO_EXEMPT_BYTES and decoded > limits.max_ratio * max(1, wire):
        raise TierlogError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"the request's {wire} bytes decode to {decoded} bytes, more than "
            f"{limits.max_ratio:g} times its size (--max-compression-ratio)",
        )


def measure_arrow(body: bytes | bytearray | memoryview, limits: ExpansionLimits) -> Declared:
    """What the stream declares, refused (413) when over the limits; nothing is decoded."""
    declared = declared_size(body)
    if declared.records > limits.max_records:
        raise too_many_records(declared.records, limits)
    check_decoded(declared.decoded_bytes, len(body), limits)
    return declared


def _view_lengths(arr: pa.Array) -> pa.Array:
    """Lengths of a binary_view / string_view array's values, from its 16-byte views."""
    n = len(arr)
    views = arr.buffers()[1]
    words = pa.Array.from_buffers(pa.int32(), 4 * (arr.offset + n), [None, views])
    firsts = pa.array(range(4 * arr.offset, 4 * (arr.offset + n), 4), pa.int64())
    return pc.if_else(arr.is_valid(), words.take(firsts), 0)


def _value_lengths(arr: pa.Array) -> pa.Array:
    t = arr.type
    if pa.types.is_dictionary(t):
        return pc.fill_null(_value_lengths(arr.dictionary).take(arr.indices), 0)
    if pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        return _view_lengths(arr)
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.int64()).fill_null(0)
    return pc.fill_null(pc.binary_length(arr), 0)


def materialized_growth(batch: pa.RecordBatch) -> int:
    """Bytes a batch's dictionary and view columns grow by once decoded to plain binary
    (a million indices into one 1 MB value are a TB). Other columns cannot grow."""
    growth = 0
    for name in ("key", "value"):
        index = batch.schema.get_field_index(name)
        if index < 0:
            continue
        col = batch.column(index)
        t = col.type
        if pa.types.is_dictionary(t) or pa.types.is_binary_view(t) or pa.types.is_string_view(t):
            total = pc.sum(_value_lengths(col)).as_py() or 0
            growth += max(0, int(total) - col.nbytes)
    return growth


def read_arrow_stream(
    body: bytes | bytearray | memoryview,
    limits: ExpansionLimits = UNLIMITED,
    measured: bool = False,
) -> pa.Table:
    """The records of an Arrow IPC stream body, decoded batch by batch within `limits`;
    INVALID_RECORD if it is not a stream, 413 when it outgrows the limits. `measured`: the
    caller already checked what the stream declares (measure_arrow)."""
    if not measured:
        measure_arrow(body, limits)
    batches: list[pa.RecordBatch] = []
    rows = decoded = 0
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(body))
        for batch in reader:
            # Full validation: a malformed stream must not reach compute kernels (memory safety).
            batch.validate(full=True)
            rows += batch.num_rows
            if rows > limits.max_records:  # the declared sizes lied: stop at once
                raise too_many_records(rows, limits, "more than ")
            decoded += batch.nbytes + materialized_growth(batch)
            check_decoded(decoded, len(body), limits)
            batches.append(batch)
        table = pa.Table.from_batches(batches, reader.schema)
        _field_names(table.schema)  # a name pyarrow cannot decode fails here, not downstream
    except (pa.ArrowException, OSError, ValueError, TypeError) as exc:  # UnicodeDecodeError too
        raise TierlogError(
            ErrorCode.INVALID_RECORD, f"body is not a valid Arrow IPC stream: {exc}"
        ) from None
    return table


def _field_names(fields: pa.Schema | pa.DataType) -> None:
    """Read every field name, nested ones too: a stream may carry names that are not UTF-8,
    which pyarrow decodes only when asked (UnicodeDecodeError, far from the request)."""
    children = fields if isinstance(fields, pa.Schema) else list(_children(fields))
    for field in children:
        _ = field.name
        _field_names(field.type)


def _children(kind: pa.DataType) -> list[pa.Field]:
    return [kind.field(i) for i in range(kind.num_fields)]


# Only brackets and quotes matter to the scan; with escapes gone, a string is "[^"]*".
_KEEP = b'{}[]"'
_NOT_KEPT = bytes(b for b in range(256) if b not in _KEEP)
_STRING = re.compile(rb'"[^"]*"')
_SCAN_CHUNK = 1 << 20
_SCAN_LOCK = threading.Lock()
# Typed scalars: with Python ints the kernels cast every chunk first (100x slower).
_BRACE, _BRACKET = pa.scalar(ord("{"), pa.uint8()), pa.scalar(ord("["), pa.uint8())
_UP, _DOWN = pa.scalar(1, pa.int64()), pa.scalar(-1, pa.int64())


def json_record_bound(body: bytes) -> int:
    """An upper bound of the records in a JSON produce body, from its raw bytes: objects
    opened at the depth of {"records": [ {...} ]} (exact for well-formed requests).

    One scan at a time per process: each holds temporaries about twice the body's size, and
    concurrent bombs would otherwise add them up (the bodies themselves are budgeted)."""
    if body.count(b"{") <= 1:
        return 0
    with _SCAN_LOCK:
        return _scan(body)


def _scan(body: bytes) -> int:
    # Escaped backslashes go first (in pairs, left to right), then escaped quotes: what is
    # left of a string is its quotes and brackets, removed whole. No copy without escapes.
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = _STRING.sub(b"", unescaped.translate(None, _NOT_KEPT))
    count = depth = 0
    for start in range(0, len(brackets), _SCAN_CHUNK):  # bounded temporaries per chunk
        chunk = pa.py_buffer(brackets[start : start + _SCAN_CHUNK])
        chars = pa.Array.from_buffers(pa.uint8(), chunk.size, [None, chunk])
        brace = pc.equal(chars, _BRACE)
        steps = pc.if_else(pc.or_(brace, pc.equal(chars, _BRACKET)), _UP, _DOWN)
        depths = pc.cumulative_sum(steps)  # relative to the depth before the chunk
        count += pc.and_(brace, pc.equal(depths, pa.scalar(3 - depth, pa.int64()))).true_count
        depth += depths[-1].as_py()
    return int(count)


def check_json_records(body: bytes, limits: ExpansionLimits) -> None:
    """Refuse (413) a JSON body that may hold more records than allowed, before parsing it.
    The scan runs only when the body has more '{' than the limit allows records."""
    if body.count(b"{") - 1 <= limits.max_records:
        return
    bound = json_record_bound(body)
    if bound > limits.max_records:
        raise too_many_records(bound, limits, "up to ")
