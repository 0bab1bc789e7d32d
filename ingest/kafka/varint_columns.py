"""Kafka's zigzag varints and length-prefixed byte strings, a whole column at a time.

A RecordBatch's records are varint-framed one after another, so finding where each record
starts is a walk; everything after that is done here with numpy over all records at once:
the varints at given positions (gathered as a (records, width) byte matrix), the byte strings
they delimit (as an Arrow BinaryView array over the batch's own buffer, cast to binary in
C++), and, the other way, varints and byte strings packed back into per-record bytes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

Ints = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]

INT_WIDTH, LONG_WIDTH = 5, 10  # the longest varint of an int32 / int64
PAD = 16  # zero bytes after a buffer, so a fixed-width gather never runs past it
_INLINE = 12  # a BinaryView element of up to 12 bytes holds them in its view
_ZEROS = bytes(PAD)
_COLUMNS = np.arange(PAD)
_SHIFTS = (7 * _COLUMNS[:LONG_WIDTH]).astype(np.uint64)


class VarintError(ValueError):
    """A varint does not end within its width."""


def padded(data: bytes) -> Bytes:
    """`data` as a (read-only) uint8 array with PAD zero bytes after it."""
    return np.frombuffer(data + _ZEROS, np.uint8)


def read(buf: Bytes, pos: Ints, width: int) -> tuple[Ints, Ints]:
    """(values, sizes) of the zigzag varints starting at `pos` (clipped into `buf`: the
    caller checks the positions it gets back against its record bounds)."""
    pos = np.minimum(pos, len(buf) - PAD)
    first = buf[pos].astype(np.int64)
    more = first >= 0x80
    if not more.any():  # every varint is one byte: small lengths, deltas, counts
        return (first >> 1) ^ -(first & 1), np.ones(len(pos), np.int64)
    second = buf[pos + 1].astype(np.int64)
    more2 = more & (second >= 0x80)
    if not more2.any():  # at most two bytes: values below 8192
        raw = (first & 0x7F) | np.where(more, second << 7, 0)
        return (raw >> 1) ^ -(raw & 1), 1 + more
    third = buf[pos + 2].astype(np.int64)
    if width >= 3 and not (more2 & (third >= 0x80)).any():  # offset deltas of big batches
        raw = (first & 0x7F) | np.where(more, (second & 0x7F) << 7, 0)
        raw |= np.where(more2, third << 14, 0)
        return (raw >> 1) ^ -(raw & 1), 1 + more + more2
    grid = buf[pos[:, None] + _COLUMNS[:width]]
    last = grid < 0x80
    if not last.any(axis=1).all():
        raise VarintError(f"a varint runs past {width} bytes")
    sizes = last.argmax(axis=1) + 1
    groups = (grid & 0x7F).astype(np.uint64) << _SHIFTS[:width]
    groups[_COLUMNS[:width] >= sizes[:, None]] = 0
    raw = np.bitwise_or.reduce(groups, axis=1)
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, sizes.astype(np.int64)


def strings(buf: Bytes, starts: Ints, lengths: Ints) -> pa.Array:
    """The binary column of `lengths[i]` bytes at `starts[i]` of `buf` (a length of -1 is
    null; the caller has checked that every string lies inside the buffer). Built as
    BinaryView, views into `buf` with no copy per record in Python, then cast to contiguous
    binary by Arrow."""
    n = len(starts)
    nulls = lengths < 0
    if nulls.all():
        return pa.nulls(n, pa.binary())
    sizes = np.where(nulls, 0, lengths)
    at = np.minimum(starts, len(buf) - PAD)
    inline = sizes <= _INLINE
    words = np.zeros((n, 4), np.int32)  # per element: length, then 12 bytes
    words[:, 0] = sizes
    if inline.any():  # up to 12 bytes: held in the view, zero-padded
        head = buf[at[:, None] + _COLUMNS[:_INLINE]]
        head *= _COLUMNS[:_INLINE] < sizes[:, None]
        if inline.all():
            words[:, 1:] = head.view(np.int32)
        else:
            words[inline, 1:] = head[inline].view(np.int32)
    if not inline.all():  # longer: a 4-byte prefix, buffer 0, the offset
        long = ~inline
        words[long, 1] = buf[at[long, None] + _COLUMNS[:4]].view(np.int32)[:, 0]
        words[long, 3] = starts[long]
    views = words
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if nulls.any() else None
    view = pa.Array.from_buffers(
        pa.binary_view(), n, [validity, pa.py_buffer(views), pa.py_buffer(buf)]
    )
    return view.cast(pa.binary())


def _table() -> tuple[Bytes, npt.NDArray[np.bool_]]:
    """The varint bytes (and which of the two are used) of every value below 2^14."""
    raw = np.arange(1 << 14)
    grid = np.stack([(raw & 0x7F) | np.where(raw >= 0x80, 0x80, 0), raw >> 7], axis=1)
    return grid.astype(np.uint8), np.stack([raw >= 0, raw >= 0x80], axis=1)


_SMALL, _SMALL_USED = _table()


def _sizes(raw: npt.NDArray[np.uint64]) -> Ints:
    sizes = np.ones(len(raw), np.int64)
    top = int(raw.max()) if len(raw) else 0
    for k in range(1, LONG_WIDTH):
        if top < 1 << (7 * k):
            break
        sizes += raw >= np.uint64(1 << (7 * k))
    return sizes


def sizes(values: Ints) -> Ints:
    """The byte count of each value's zigzag varint."""
    return _sizes(((values << 1) ^ (values >> 63)).view(np.uint64))


def _column(v: Ints) -> tuple[Bytes, npt.NDArray[np.bool_] | None]:
    """(bytes, which are used) of one column's zigzag varints, as a (rows, width) grid; None
    when every byte is used."""
    raw = (v << 1) ^ (v >> 63)
    top = int(raw.view(np.uint64).max()) if len(v) else 0
    if top < 0x80:
        return raw.astype(np.uint8)[:, None], None
    if top < 1 << 14:
        return _SMALL[raw], _SMALL_USED[raw]
    big = raw.view(np.uint64)
    sizes = _sizes(big)
    width = int(sizes.max())
    grid = ((big[:, None] >> _SHIFTS[:width]) & np.uint64(0x7F)).astype(np.uint8)
    grid[_COLUMNS[:width] < sizes[:, None] - 1] |= 0x80
    return grid, _COLUMNS[:width] < sizes[:, None]


def packed(columns: list[Ints]) -> pa.Array:
    """Per row, the zigzag varints of `columns` one after another, as a binary column."""
    n = len(columns[0]) if columns else 0
    grids, masks = [], []
    for values in columns:
        grid, mask = _column(values.astype(np.int64))
        grids.append(grid)
        masks.append(mask)
    grid = np.hstack(grids)
    if all(m is None for m in masks):  # one byte each: nothing to squeeze out
        offsets = np.arange(0, grid.size + 1, grid.shape[1], dtype=np.int32)
        data = grid.ravel()
    else:
        used = np.hstack(
            [np.ones(g.shape, bool) if m is None else m for g, m in zip(grids, masks, strict=True)]
        )
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(used.sum(axis=1), out=offsets[1:])
        data = np.ascontiguousarray(grid[used])
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
