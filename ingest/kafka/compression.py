"""Decompression of a Kafka RecordBatch's records (attributes bits 0-2), bounded.

All four Kafka codecs come from pyarrow's bundled libraries (no extra dependency): gzip, LZ4
frame and zstd as streams, snappy raw or in the xerial framing the Java client writes. Every
read stops one byte past the caller's limit, so a small compressed batch cannot expand into
gigabytes (a decompression bomb) before it is refused: the limit is the broker's expansion
budget for the batch's compressed size (ingest/service/expansion.py), so the ratio cap is
enforced while decompressing, never after.
"""

from __future__ import annotations

import struct

import pyarrow as pa

from logformat.errors import ErrorCode, TierlogError

CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_XERIAL = b"\x82SNAPPY\x00"


class DecodedTooLarge(TierlogError):
    """The data decodes to more than the limit: at least `decoded` bytes (Kafka's
    RecordTooLargeException; the caller restates it with the limit the request broke)."""

    def __init__(self, decoded: int) -> None:
        super().__init__(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"a record batch decompresses to at least {decoded} bytes, past the broker's limit",
        )
        self.decoded = decoded


def _stream(data: bytes, codec: str, limit: int) -> bytes:
    with pa.CompressedInputStream(pa.BufferReader(data), codec) as stream:
        out = stream.read(limit + 1)
    if len(out) > limit:
        raise DecodedTooLarge(len(out))
    return bytes(out)


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 35:
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _snappy_block(block: bytes, limit: int) -> bytes:
    size, _ = _uvarint(block, 0)  # raw snappy starts with the uncompressed length
    if size > limit:
        raise DecodedTooLarge(size)
    return bytes(pa.Codec("snappy").decompress(block, decompressed_size=size))


def _snappy(data: bytes, limit: int) -> bytes:
    if not data.startswith(_XERIAL):
        return _snappy_block(data, limit)
    parts, total, pos = [], 0, 16  # magic, version, compatible version
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        try:
            part = _snappy_block(data[pos + 4 : pos + 4 + size], limit - total)
        except DecodedTooLarge as exc:
            raise DecodedTooLarge(total + exc.decoded) from None
        parts.append(part)
        total += len(part)
        pos += 4 + size
    return b"".join(parts)


def decompress(codec_id: int, data: bytes, limit: int) -> bytes:
    """The records of a batch compressed with `codec_id`, at most `limit` bytes of them;
    DecodedTooLarge as soon as they would be more."""
    codec = CODECS.get(codec_id)
    if codec is None:
        raise TierlogError(
            ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec {codec_id} in record batch"
        )
    try:
        return _snappy(data, limit) if codec == "snappy" else _stream(data, codec, limit)
    except TierlogError:
        raise
    except (OSError, ValueError, struct.error, pa.ArrowException) as exc:
        raise TierlogError(
            ErrorCode.CORRUPT_MESSAGE, f"the batch's {codec} data does not decompress: {exc}"
        ) from None
