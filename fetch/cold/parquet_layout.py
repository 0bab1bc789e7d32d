"""A cold file's Parquet layout: its footer, its row groups' byte ranges and offset/timestamp
statistics, and decoding chosen row groups from fetched byte ranges (docs/design.md §4).

Files are written by coldstore/parquet_writer.py: CONSUMER_SCHEMA rows sorted by offset, row
groups of a few MB, min/max statistics on `offset` and `timestamp`. A reader therefore needs
only the footer (a tail GET) to know which byte ranges hold which offsets, and then just those
ranges. The functions that parse or decode are CPU work: callers run them in a thread pool.
"""

from __future__ import annotations

import bisect
import io
import struct
from collections.abc import Sequence
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from logformat.schema import CONSUMER_SCHEMA

MAGIC = b"PAR1"
TAIL_GUESS = 64 * 1024  # one GET fetches the footer of any ordinary file
RECORD_COLUMNS = CONSUMER_SCHEMA.names


class CorruptColdFileError(ValueError):
    """The bytes are not a cold file this reader understands."""


class RowGroup(NamedTuple):
    number: int  # its position in the file
    start: int  # byte range [start, end) of its column chunks
    end: int
    rows: int
    first_offset: int
    last_offset: int
    min_timestamp: int | None  # ms; None without statistics
    max_timestamp: int | None
    nbytes: int  # uncompressed size (Parquet's total_byte_size)


class FileLayout(NamedTuple):
    size: int
    metadata: pq.FileMetaData
    groups: list[RowGroup]

    @property
    def footer_start(self) -> int:
        return self.groups[-1].end if self.groups else 0

    def group_for(self, offset: int) -> int | None:
        """Index of the first row group holding an offset >= `offset` (None: past the end)."""
        lasts = [g.last_offset for g in self.groups]
        i = bisect.bisect_left(lasts, offset)
        return i if i < len(self.groups) else None


def footer_length(tail: bytes) -> int:
    """The length of the footer metadata, from the last 8 bytes of a Parquet file."""
    if len(tail) < 8 or tail[-4:] != MAGIC:
        raise CorruptColdFileError("not a Parquet file (no PAR1 trailer)")
    (length,) = struct.unpack("<I", tail[-8:-4])
    return int(length)


def parse_footer(tail: bytes, size: int) -> FileLayout:
    """The layout of a file of `size` bytes, from a tail holding its whole footer."""
    needed = footer_length(tail) + 8
    if len(tail) < needed:
        raise CorruptColdFileError(f"tail of {len(tail)} bytes lacks the {needed}-byte footer")
    metadata = pq.read_metadata(pa.BufferReader(tail[-needed:]))
    names = [metadata.schema.column(i).name for i in range(metadata.num_columns)]
    try:
        off_col, ts_col = names.index("offset"), names.index("timestamp")
    except ValueError:
        raise CorruptColdFileError(f"a cold file needs offset and timestamp, has {names}") from None
    groups = []
    for i in range(metadata.num_row_groups):
        rg = metadata.row_group(i)
        start, end = size, 0
        for j in range(rg.num_columns):
            col = rg.column(j)
            first = col.dictionary_page_offset if col.has_dictionary_page else None
            begin = col.data_page_offset if first is None else min(first, col.data_page_offset)
            start, end = min(start, begin), max(end, begin + col.total_compressed_size)
        offsets = rg.column(off_col).statistics
        if offsets is None or not offsets.has_min_max:
            raise CorruptColdFileError(f"row group {i} has no offset statistics")
        stamps = rg.column(ts_col).statistics
        has_ts = stamps is not None and stamps.has_min_max
        groups.append(
            RowGroup(
                i,
                start,
                end,
                rg.num_rows,
                int(offsets.min),
                int(offsets.max),
                _ms(stamps.min) if has_ts else None,
                _ms(stamps.max) if has_ts else None,
                rg.total_byte_size,
            )
        )
    return FileLayout(size, metadata, groups)


def top_level_columns(metadata: pq.FileMetaData) -> set[str]:
    """The file's top-level column names (a struct's leaves are named by their paths)."""
    return {metadata.schema.column(i).path.split(".")[0] for i in range(metadata.num_columns)}


def _ms(value: object) -> int:
    """A timestamp statistic (datetime or int, by pyarrow version) as ms since the epoch."""
    if isinstance(value, int):
        return value
    ts = pa.scalar(value, pa.timestamp("ms", tz="UTC"))
    return int(ts.value)


class SparseFile(io.RawIOBase):
    """A read-only file of `size` bytes of which only some ranges were fetched; reading any
    other byte is an error (never silently zeros)."""

    def __init__(self, size: int, pieces: Sequence[tuple[int, bytes]]) -> None:
        super().__init__()
        self._size = size
        self._pieces = sorted(pieces, key=lambda p: p[0])
        self._starts = [p[0] for p in self._pieces]
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def size(self) -> int:
        return self._size

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        out = memoryview(buffer).cast("B")
        want = min(len(out), self._size - self._pos)
        done = 0
        while done < want:
            pos = self._pos + done
            i = bisect.bisect_right(self._starts, pos) - 1
            if i < 0 or pos >= self._starts[i] + len(self._pieces[i][1]):
                raise OSError(f"byte {pos} of the cold file was not fetched")
            start, data = self._pieces[i]
            n = min(want - done, start + len(data) - pos)
            out[done : done + n] = memoryview(data)[pos - start : pos - start + n]
            done += n
        self._pos += done
        return done


def decode_group(layout: FileLayout, pieces: Sequence[tuple[int, bytes]], group: int) -> pa.Table:
    """Row group `group` as a CONSUMER_SCHEMA table, from fetched byte ranges covering it."""
    end = layout.groups[group].end
    prefix = next((d for s, d in pieces if s == 0 and len(d) >= end), None)
    # A piece from the file's first byte (a whole file the prefetcher read) is read in place
    # by Arrow; anything else through the sparse view, which costs a copy per read.
    source: pa.BufferReader | SparseFile = (
        pa.BufferReader(pa.py_buffer(prefix))
        if prefix is not None
        else SparseFile(layout.size, pieces)
    )
    reader = pq.ParquetFile(source, metadata=layout.metadata)
    # Only the record columns: a typed lake table's files also hold value_typed/value_error
    # (docs/lake-tables.md), which a fetch reads only when asked (fetch/cold/typed_read.py).
    table = reader.read_row_group(group, columns=RECORD_COLUMNS, use_threads=False)
    if not table.schema.equals(CONSUMER_SCHEMA, check_metadata=True):
        # The same columns; drop any file-level metadata so responses equal the hot path's.
        table = pa.Table.from_arrays(table.columns, schema=CONSUMER_SCHEMA)
    return table
