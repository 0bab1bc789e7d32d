"""The value column of a segment's records, read alone (tiering/typed_columns.py's first pass).

A typed file's schema ids must be known before its writer opens, so tiering looks at the
values once before writing the file. Decoding whole frames for that (keys, headers and all)
cost about a seventh of typed tiering (docs/lake-tables.md, "Cost"); here each frame's Arrow
IPC payload is read with only the offset deltas and the values selected, so Arrow skips the
other columns' buffers. No CRC is checked: writing the file checks every frame it reads.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from coldstore.parquet_writer import CorruptSegmentError, Source, segment_buffer
from logformat.frame import HEADER_SIZE, CorruptFrameError, decode_header
from logformat.schema import RECORD_SCHEMA

_SCHEMA_MESSAGE = RECORD_SCHEMA.serialize().to_pybytes()
_OPTIONS = pa.ipc.IpcReadOptions(
    included_fields=[RECORD_SCHEMA.get_field_index(n) for n in ("offset_delta", "value")]
)


def segment_values(segment: Source, from_offset: int, to_offset: int) -> Iterator[pa.Array]:
    """The values of the records with offsets in [from_offset, to_offset), frame by frame."""
    with segment_buffer(segment) as buf:
        view = memoryview(buf)
        pos = 0
        while pos < len(view):
            try:
                header = decode_header(view, pos)
                if header.base_offset >= to_offset:
                    return
                body = view[pos + HEADER_SIZE : pos + header.size]
                stream = pa.py_buffer(b"".join((_SCHEMA_MESSAGE, body)))
                batch = pa.ipc.open_stream(stream, options=_OPTIONS).read_next_batch()
            except (CorruptFrameError, pa.ArrowException, StopIteration) as error:
                raise CorruptSegmentError(f"frame at byte {pos}: {error}") from error
            pos += header.size
            if header.last_offset < from_offset or not batch.num_rows:
                continue
            if header.base_offset >= from_offset and header.last_offset < to_offset:
                yield batch.column("value")  # the whole frame is in the range
                continue
            offsets = pc.add(batch.column("offset_delta").cast(pa.int64()), header.base_offset)
            wanted = pc.and_(pc.greater_equal(offsets, from_offset), pc.less(offsets, to_offset))
            yield batch.column("value").filter(wanted)
