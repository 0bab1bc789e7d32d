"""May a cold data file hold any of some keys? Answered from its footer alone (a ranged GET of
the tail): each row group's min/max statistics on `key` rule a key out when it lies outside
them. A file without statistics on `key` (written before they were kept) may hold anything.
False is certain; True means "read the file to know"."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from coldstore.object_store import ObjectStore

TAIL_BYTES = 64 * 1024  # one GET holds the footer of any file we write
MAGIC = b"PAR1"


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


def _key_column(metadata: pq.FileMetaData) -> int | None:
    names = [metadata.schema.column(i).name for i in range(metadata.num_columns)]
    return names.index("key") if "key" in names else None


def may_hold_keys(store: ObjectStore, object_key: str, size: int, keys: Sequence[bytes]) -> bool:
    metadata = read_footer(store, object_key, size)
    column = None if metadata is None else _key_column(metadata)
    if metadata is None or column is None:
        return True
    for i in range(metadata.num_row_groups):
        stats = metadata.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max:
            return True
        lo, hi = _as_bytes(stats.min), _as_bytes(stats.max)
        if any(lo <= k <= hi for k in keys):
            return True
    return False


def _as_bytes(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"key statistics of type {type(value).__name__}")
