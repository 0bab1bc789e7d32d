"""What an Arrow IPC stream declares about itself, read before anything is decompressed.

Each record batch (and dictionary batch) message of a stream carries flatbuffer metadata:
its row count, the length of every field node and the offset and length of every body
buffer. A compressed buffer starts with its uncompressed length (int64). Reading those
costs a few bytes per buffer, so a produce request can be measured — rows, bytes after
decompression — and refused before a 6 KB body turns into gigabytes (Arrow's Message.fbs,
Schema.fbs; the parser reads only the fields it needs).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import pyarrow as pa

from logformat.errors import ErrorCode, TierlogError

_DICTIONARY_BATCH, _RECORD_BATCH = 2, 3  # MessageHeader union tags
_SLOT_BYTES = 8  # charged per declared value slot: offsets, validity, casts grow with it


class Declared(NamedTuple):
    records: int  # rows of the record batches
    decoded_bytes: int  # body bytes after decompression, plus _SLOT_BYTES per value slot


class _Table:
    """One flatbuffer table: field lookups through its vtable, bounds-checked."""

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        (soffset,) = struct.unpack_from("<i", buf, pos)
        self.vtable = pos - soffset
        self.vsize = struct.unpack_from("<H", buf, self.vtable)[0]

    def _field(self, index: int) -> int:
        slot = 4 + 2 * index
        if slot + 2 > self.vsize:
            return 0
        return int(struct.unpack_from("<H", self.buf, self.vtable + slot)[0])

    def scalar(self, index: int, fmt: str, default: int = 0) -> int:
        off = self._field(index)
        return int(struct.unpack_from(fmt, self.buf, self.pos + off)[0]) if off else default

    def table(self, index: int) -> _Table | None:
        off = self._field(index)
        if not off:
            return None
        at = self.pos + off
        return _Table(self.buf, at + struct.unpack_from("<I", self.buf, at)[0])

    def structs(self, index: int, size: int) -> list[tuple[int, int]]:
        """A vector of 16-byte structs of two int64 (FieldNode, Buffer)."""
        off = self._field(index)
        if not off:
            return []
        at = self.pos + off
        start = at + struct.unpack_from("<I", self.buf, at)[0]
        (count,) = struct.unpack_from("<I", self.buf, start)
        if start + 4 + count * size > len(self.buf):
            raise struct.error("vector out of bounds")
        return [struct.unpack_from("<qq", self.buf, start + 4 + i * size) for i in range(count)]


def _batch_size(batch: _Table, body: pa.Buffer | None) -> tuple[int, int]:
    """(rows, decoded bytes) of a RecordBatch table and its message body."""
    rows = batch.scalar(0, "<q")
    nodes = batch.structs(1, 16)
    buffers = batch.structs(2, 16)
    compressed = batch.table(3) is not None
    size = body.size if body is not None else 0
    view = memoryview(body) if body is not None else memoryview(b"")
    total = 0
    for offset, length in buffers:
        if offset < 0 or length < 0 or offset + length > size:
            raise struct.error("buffer out of the message body")
        if not compressed or length == 0:
            total += length
            continue
        if length < 8:
            raise struct.error("compressed buffer without its length prefix")
        (raw,) = struct.unpack_from("<q", view, offset)
        total += length - 8 if raw == -1 else raw  # -1: stored uncompressed
    slots = sum(max(0, n) for n, _ in nodes)
    if rows < 0 or total < 0:
        raise struct.error("negative sizes")
    return rows, total + _SLOT_BYTES * slots


def declared_size(body: bytes | bytearray | memoryview) -> Declared:
    """Rows and decoded bytes the stream's messages declare; INVALID_RECORD if unreadable."""
    records = decoded = 0
    try:
        reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(body))
        while True:
            try:
                message = reader.read_next_message()
            except StopIteration:
                break
            if message is None:
                break
            meta = message.metadata.to_pybytes()
            root = _Table(meta, struct.unpack_from("<I", meta, 0)[0])
            kind = root.scalar(1, "<B")
            header = root.table(2)
            if header is None or kind not in (_DICTIONARY_BATCH, _RECORD_BATCH):
                continue  # the schema (or a message type pyarrow itself will refuse)
            batch = header if kind == _RECORD_BATCH else header.table(1)
            if batch is None:
                continue
            rows, size = _batch_size(batch, message.body)
            records += rows if kind == _RECORD_BATCH else 0
            decoded += size
    except (pa.ArrowException, OSError, ValueError, struct.error, IndexError) as exc:
        raise TierlogError(
            ErrorCode.INVALID_RECORD, f"body is not a valid Arrow IPC stream: {exc}"
        ) from None
    return Declared(records, decoded)
