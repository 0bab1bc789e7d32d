"""Record headers, bounded per record and per batch, for both protocols: a count and a byte
size each (--max-headers-per-record, --max-headers-per-batch, --max-header-bytes-per-record,
--max-header-bytes-per-batch). Checked from per-record counts and sizes before any header is
walked one by one: Kafka reads them from each record's header count and the bytes left in the
record (ingest/kafka/record_codec.py), HTTP from the built headers column."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ingest.data_limits import DataLimits
from logformat.errors import ErrorCode, TierlogError

Ints = npt.NDArray[np.int64]


def _refused(what: str, index: int | None, got: int, limit: int, flag: str) -> TierlogError:
    where = "the batch" if index is None else f"record {index}"
    extra = {} if index is None else {"record_index": index}
    return TierlogError(
        ErrorCode.INVALID_RECORD,
        f"{where} carries {got} header {what}; the broker takes at most {limit} ({flag})",
        **extra,
    )


def check_headers(counts: Ints, sizes: Ints, limits: DataLimits) -> None:
    """`counts[i]` headers taking `sizes[i]` bytes in record i: refused (INVALID_RECORD,
    naming the first record over a per-record bound) beyond the limits."""
    if not len(counts):
        return
    per_record = (
        (counts, limits.max_headers_per_record, "entries", "--max-headers-per-record"),
        (sizes, limits.max_header_bytes_per_record, "bytes", "--max-header-bytes-per-record"),
    )
    for values, limit, what, flag in per_record:
        over = np.flatnonzero(values > limit)
        if len(over):
            i = int(over[0])
            raise _refused(what, i, int(values[i]), limit, flag)
    total = int(counts.sum())
    if total > limits.max_headers_per_batch:
        limit = limits.max_headers_per_batch
        raise _refused("entries", None, total, limit, "--max-headers-per-batch")
    size = int(sizes.sum())
    if size > limits.max_header_bytes_per_batch:
        raise _refused(
            "bytes", None, size, limits.max_header_bytes_per_batch, "--max-header-bytes-per-batch"
        )


def check_header_column(headers: pa.Array, limits: DataLimits) -> None:
    """The same bounds over a RECORD_SCHEMA headers column (HTTP produce): counts from the
    list lengths, sizes from the keys' and values' byte lengths, all in Arrow."""
    if headers.null_count == len(headers):
        return
    counts = np.asarray(pc.list_value_length(headers).fill_null(0).to_numpy(), np.int64)
    entries = headers.flatten()
    if isinstance(entries, pa.ChunkedArray):
        entries = entries.combine_chunks()
    keys, values = entries.field(0), entries.field(1)
    entry_bytes = pc.add(
        pc.binary_length(keys.cast(pa.binary())).fill_null(0),
        pc.binary_length(values).fill_null(0),
    )
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    cumulative = np.zeros(len(entry_bytes) + 1, np.int64)
    np.cumsum(np.asarray(entry_bytes.to_numpy(zero_copy_only=False), np.int64), out=cumulative[1:])
    sizes = cumulative[offsets[1:]] - cumulative[offsets[:-1]]
    check_headers(counts, sizes, limits)
