"""May a cold data file hold any of some keys? Answered from its footer and bloom filters alone
(ranged GETs), so an erasure reads only the files that may hold a key.

Per row group: min/max statistics on `key` (when a writer kept them) rule out keys outside
them; the row group's Parquet bloom filter on `key` (written by tiering and compaction since
issue 31: coldstore/parquet_writer.KEY_BLOOM_FILTER) rules out keys it does not contain. A
row group with neither (files written before) may hold anything. False is certain; True
means "read the file to know".

pyarrow writes bloom filters but cannot read them; the check below is the Parquet format's
split-block bloom filter (SBBF) lookup: XXH64 (seed 0) of the value's plain encoding (a
byte array's bytes), the upper 32 bits choosing a 256-bit block, the lower 32 bits times
eight fixed salts choosing one bit in each of its eight 32-bit words.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from coldstore.object_store import ObjectStore

TAIL_BYTES = 64 * 1024  # one GET holds the footer of any file we write
MAX_FILTERS_BYTES = 16 << 20  # past this, reading the file is about as cheap
MAGIC = b"PAR1"
_SALT = (
    0x47B6137B,
    0x44974D91,
    0x8824AD5B,
    0xA2B7289D,
    0x705495C7,
    0x2DF1424B,
    0x9EFC4947,
    0x5C6BFB31,
)
_HEADER_MAX = 64  # a BloomFilterHeader (Thrift compact: 4 small fields) is far shorter


def read_footer(store: ObjectStore, key: str, size: int) -> pq.FileMetaData | None:
    """The file's footer metadata; None when it is not a readable Parquet footer."""
    tail = store.get_range(key, max(0, size - TAIL_BYTES), size)
    if len(tail) < 8 or tail[-4:] != MAGIC:
        return None
    (length,) = struct.unpack("<I", tail[-8:-4])
    if length + 8 > len(tail):
        tail = store.get_range(key, max(0, size - length - 8), size)
    if length + 8 > len(tail):
        return None
    return pq.read_metadata(pa.BufferReader(tail[-(length + 8) :]))


def bloom_bitset(data: bytes) -> bytes | None:
    """The bitset of a serialized bloom filter (header + bitset); None if unreadable.
    The header's first field is numBytes (Thrift compact: field 1, i32, zigzag varint)."""
    if not data or data[0] != 0x15:
        return None
    value, shift, pos = 0, 0, 1
    while pos < len(data):
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            break
    num_bytes = (value >> 1) ^ -(value & 1)
    if num_bytes <= 0 or num_bytes % 32 or num_bytes > len(data) - pos:
        return None
    return data[len(data) - num_bytes :]


def bloom_may_contain(bitset: bytes, value: bytes) -> bool:
    h = xxhash.xxh64_intdigest(value, seed=0)
    blocks = len(bitset) // 32
    block = ((h >> 32) * blocks) >> 32
    key = h & 0xFFFFFFFF
    words = struct.unpack_from("<8I", bitset, block * 32)
    return all(words[i] & (1 << (((key * _SALT[i]) & 0xFFFFFFFF) >> 27)) for i in range(8))


def _key_column(metadata: pq.FileMetaData) -> int | None:
    names = [metadata.schema.column(i).name for i in range(metadata.num_columns)]
    return names.index("key") if "key" in names else None


def _candidates(chunk: pq.ColumnChunkMetaData, keys: Sequence[bytes]) -> list[bytes]:
    """The keys a row group's min/max statistics on `key` leave possible (all without them)."""
    stats = chunk.statistics
    if stats is None or not stats.has_min_max:
        return list(keys)
    lo, hi = _as_bytes(stats.min), _as_bytes(stats.max)
    return [k for k in keys if lo <= k <= hi]


def may_hold_keys(store: ObjectStore, object_key: str, size: int, keys: Sequence[bytes]) -> bool:
    metadata = read_footer(store, object_key, size)
    column = None if metadata is None else _key_column(metadata)
    if metadata is None or column is None:
        return True
    checks: list[tuple[int, int, list[bytes]]] = []  # (bloom offset, length, keys to test)
    for i in range(metadata.num_row_groups):
        chunk = metadata.row_group(i).column(column)
        possible = _candidates(chunk, keys)
        if not possible:
            continue
        offset, length = chunk.bloom_filter_offset, chunk.bloom_filter_length
        if not offset or not length or offset <= 0 or length <= 0:
            return True  # no filter (or older writers' length-less one): read the file
        checks.append((offset, length, possible))
    if not checks:
        return False
    # A writer puts the filters of all row groups together: one GET for all of them.
    start = min(o for o, _, _ in checks)
    end = max(o + n for o, n, _ in checks)
    if end - start > MAX_FILTERS_BYTES:
        return True
    blob = store.get_range(object_key, start, end)
    for offset, length, possible in checks:
        bitset = bloom_bitset(blob[offset - start : offset - start + length])
        if bitset is None or any(bloom_may_contain(bitset, k) for k in possible):
            return True
    return False


def _as_bytes(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"key statistics of type {type(value).__name__}")
