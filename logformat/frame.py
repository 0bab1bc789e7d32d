"""Frames: the unit written, replicated and fetched (docs/design.md §3).

A frame is a fixed little-endian header followed by one Arrow IPC RecordBatch message in
RECORD_SCHEMA (no schema message: the schema is fixed).

    offset  size  field
    0       4     magic            b"TLF1"
    4       8     base_offset      assigned by the leader (patched in place, outside the CRC)
    12      4     leader_epoch     assigned by the leader (patched in place, outside the CRC)
    16      4     payload_length   bytes of the Arrow message after the header
    20      4     crc              CRC-32C of bytes 24..end (header tail + payload)
    24      2     attributes       bits 0-2: compression codec of the Arrow buffers
    26      4     record_count
    30      8     producer_id      -1 when not idempotent
    38      2     producer_epoch
    40      4     base_sequence
    44      8     first_timestamp  ms since epoch, of the first record
    52      8     max_timestamp    ms since epoch, the largest in the frame
    60            payload

As in Kafka's RecordBatch, the CRC leaves out the fields the broker assigns, so assigning
offsets is O(1) per frame: no re-encoding and no re-checksumming of the payload.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import google_crc32c
import pyarrow as pa
import pyarrow.compute as pc

from logformat.schema import RECORD_SCHEMA

MAGIC = b"TLF1"
HEADER = struct.Struct("<4sqiIIHiqhiqq")
HEADER_SIZE = HEADER.size  # 60
_ASSIGNED = struct.Struct("<qi")  # base_offset, leader_epoch at byte 4
_CRC = struct.Struct("<I")  # at byte 20
CRC_START = 24  # the CRC covers the frame from here to its end
_EOS = 8  # Arrow IPC end-of-stream marker written by the stream writer

CODECS = {None: 0, "none": 0, "zstd": 1, "lz4": 2}
CODEC_NAMES = {0: None, 1: "zstd", 2: "lz4"}
_CODEC_MASK = 0x7

# Absent producer fields, as in Kafka.
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1


class CorruptFrameError(ValueError):
    """The bytes are not a whole, valid frame (bad magic, short read or CRC mismatch).
    `offset`, when known, is the offset the bad frame should have started at."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


class FrameHeader(NamedTuple):
    magic: bytes
    base_offset: int
    leader_epoch: int
    payload_length: int
    crc: int
    attributes: int
    record_count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    first_timestamp: int
    max_timestamp: int

    @property
    def size(self) -> int:
        """Bytes of the whole frame, header included."""
        return HEADER_SIZE + self.payload_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count

    @property
    def compression(self) -> str | None:
        return CODEC_NAMES.get(self.attributes & _CODEC_MASK)


_SCHEMA_MESSAGE_SIZE = len(RECORD_SCHEMA.serialize())
_WRITE_OPTIONS = {name: pa.ipc.IpcWriteOptions(compression=name) for name in ("zstd", "lz4")}


def serialize_batch(batch: pa.RecordBatch, compression: str | None = None) -> pa.Buffer:
    """The Arrow IPC RecordBatch message for `batch` (no schema message, no EOS)."""
    if compression in (None, "none"):
        return batch.serialize()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, RECORD_SCHEMA, options=_WRITE_OPTIONS[compression]) as writer:
        writer.write_batch(batch)
    stream = sink.getvalue()
    return stream.slice(_SCHEMA_MESSAGE_SIZE, stream.size - _SCHEMA_MESSAGE_SIZE - _EOS)


def encode_frame(
    batch: pa.RecordBatch,
    *,
    base_offset: int = 0,
    leader_epoch: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    compression: str | None = None,
) -> bytearray:
    """Encode a RECORD_SCHEMA batch of at least one record as one frame.

    Returns a bytearray so the leader can assign offsets in place; the payload is copied
    exactly once, from Arrow's buffer into the frame.
    """
    if batch.num_rows == 0:
        raise ValueError("a frame holds at least one record")
    if not batch.schema.equals(RECORD_SCHEMA):
        raise ValueError("batch does not have the fixed record schema")
    if compression not in CODECS:
        raise ValueError(f"unknown compression codec {compression!r}")
    payload = serialize_batch(batch, compression)
    ts = batch.column(1).cast(pa.int64())
    return pack_frame(
        payload,
        base_offset=base_offset,
        leader_epoch=leader_epoch,
        compression=compression,
        record_count=batch.num_rows,
        producer=(producer_id, producer_epoch, base_sequence),
        first_timestamp=ts[0].as_py(),
        max_timestamp=pc.max(ts).as_py(),
    )


def pack_frame(
    payload: pa.Buffer,
    *,
    base_offset: int,
    leader_epoch: int,
    compression: str | None,
    record_count: int,
    producer: tuple[int, int, int] = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE),
    first_timestamp: int,
    max_timestamp: int,
) -> bytearray:
    """Header + `payload` (an Arrow RecordBatch message) as one frame, CRC filled in.

    `record_count` is the frame's offset span; `producer` is (id, epoch, base sequence).
    The one place that lays out a header: encode_frame and the log cleaner both use it.
    """
    frame = bytearray(HEADER_SIZE + payload.size)
    HEADER.pack_into(
        frame,
        0,
        MAGIC,
        base_offset,
        leader_epoch,
        payload.size,
        0,
        CODECS[compression],
        record_count,
        *producer,
        first_timestamp,
        max_timestamp,
    )
    frame[HEADER_SIZE:] = memoryview(payload)
    # google_crc32c wants read-only buffers: the 36 header bytes as bytes, then Arrow's buffer.
    crc = google_crc32c.extend(google_crc32c.value(bytes(frame[CRC_START:HEADER_SIZE])), payload)
    _CRC.pack_into(frame, 20, crc)
    return frame


def decode_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> FrameHeader:
    """Parse the header at `pos`; checks magic and that the whole frame is in `buf`."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptFrameError(f"short header at byte {pos}")
    header = FrameHeader._make(HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptFrameError(f"bad magic {header.magic!r} at byte {pos}")
    if header.record_count <= 0:
        raise CorruptFrameError(f"bad record count {header.record_count} at byte {pos}")
    if len(buf) - pos < header.size:
        raise CorruptFrameError(f"frame at byte {pos} is cut short")
    return header


def verify_crc(buf: bytes | bytearray | memoryview, pos: int, header: FrameHeader) -> None:
    view = memoryview(buf)[pos + CRC_START : pos + header.size]
    if google_crc32c.value(bytes(view)) != header.crc:
        raise CorruptFrameError(f"CRC mismatch in frame at byte {pos}")


def assign(
    frame: bytearray | memoryview, base_offset: int, leader_epoch: int, pos: int = 0
) -> None:
    """Set a frame's base offset and leader epoch in place (the leader's O(1) step)."""
    _ASSIGNED.pack_into(frame, pos + 4, base_offset, leader_epoch)


def decode_records(
    frame: bytes | bytearray | memoryview, pos: int = 0, *, verify: bool = True
) -> pa.RecordBatch:
    """The RECORD_SCHEMA batch inside the frame at `pos`."""
    header = decode_header(frame, pos)
    if verify:
        verify_crc(frame, pos, header)
    body = pa.py_buffer(frame).slice(pos + HEADER_SIZE, header.payload_length)
    if body.address % 8:
        # The 60-byte header leaves every other payload 4 bytes off 8-byte alignment; Arrow
        # would hand out misaligned int64 buffers, which some consumers (e.g. arrow-rs via
        # the C data interface) reject. One memcpy into an aligned buffer avoids that.
        body = pa.py_buffer(body.to_pybytes())
    try:
        return pa.ipc.read_record_batch(body, RECORD_SCHEMA)
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptFrameError(f"frame at byte {pos} holds no valid record batch: {exc}") from exc


class ScanResult(NamedTuple):
    frames: list[tuple[int, FrameHeader]]  # (position, header) of every whole, valid frame
    valid_end: int  # byte position just past the last valid frame
    torn: bool  # True when bytes after valid_end are not a whole, valid frame


def scan(buf: bytes | bytearray | memoryview, start: int = 0, *, verify: bool = True) -> ScanResult:
    """Walk frames from `start`, stopping at the first short, malformed or corrupt one.

    This is crash recovery's torn-tail detection: everything before `valid_end` is whole.
    """
    frames: list[tuple[int, FrameHeader]] = []
    pos, end = start, len(buf)
    while pos < end:
        try:
            header = decode_header(buf, pos)
            if verify:
                verify_crc(buf, pos, header)
        except CorruptFrameError:
            return ScanResult(frames, pos, True)
        frames.append((pos, header))
        pos += header.size
    return ScanResult(frames, pos, False)


def iter_headers(
    buf: bytes | bytearray | memoryview, start: int = 0
) -> Iterator[tuple[int, FrameHeader]]:
    """(position, header) of consecutive frames without CRC checks: for trusted bytes."""
    pos, end = start, len(buf)
    while pos < end:
        header = decode_header(buf, pos)
        yield pos, header
        pos += header.size


def first_corrupt_offset(buf: bytes | bytearray | memoryview, base_offset: int) -> int | None:
    """None when `buf` is whole frames with valid CRCs and dense offsets from `base_offset`
    (a sealed segment as it must be); else the offset where the first bad frame should start.
    One CRC per frame: this is what a segment copied between nodes is checked with."""
    result = scan(buf, 0)
    expected = base_offset
    for _, header in result.frames:
        if header.base_offset != expected:
            return expected
        expected = header.next_offset
    return expected if result.torn else None
