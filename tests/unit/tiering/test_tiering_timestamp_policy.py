"""The bad-record policy of tiering (coldstore/timestamp_policy.py), deterministic: a
timestamp the cold tier cannot hold is clamped, the original kept in a header, the record
kept; a batch whose timestamps all fit is returned as it was."""

from __future__ import annotations

import pyarrow as pa

from coldstore.timestamp_policy import (
    MAX_WRITABLE_MS,
    ORIGINAL_TIMESTAMP_HEADER,
    clamp_timestamps,
)
from logformat.schema import CONSUMER_SCHEMA, HEADERS, TIMESTAMP


def _batch(stamps: list[int], headers: list[object] | None = None) -> pa.RecordBatch:
    n = len(stamps)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(range(10, 10 + n), pa.int64()),
            pa.array(stamps, TIMESTAMP),
            pa.array([b"k"] * n, pa.binary()),
            pa.array([b"v"] * n, pa.binary()),
            pa.array(headers or [None] * n, HEADERS),
        ],
        schema=CONSUMER_SCHEMA,
    )


def test_a_batch_that_fits_is_untouched() -> None:
    batch = _batch([0, 1_700_000_000_000, MAX_WRITABLE_MS])
    out, clamped = clamp_timestamps(batch)
    assert out is batch and clamped == []


def test_out_of_range_timestamps_are_clamped_and_kept_in_a_header() -> None:
    given = [{"key": "h", "value": b"1"}]
    batch = _batch([2**62, 5, -(2**63), MAX_WRITABLE_MS + 1], [given, None, None, []])
    out, clamped = clamp_timestamps(batch)
    assert [(c.offset, c.original_ms) for c in clamped] == [
        (10, 2**62),
        (12, -(2**63)),
        (13, MAX_WRITABLE_MS + 1),
    ]
    assert out.schema == CONSUMER_SCHEMA and out.num_rows == 4
    assert out.column(1).cast(pa.int64()).to_pylist() == [MAX_WRITABLE_MS, 5, 0, MAX_WRITABLE_MS]
    note = {"key": ORIGINAL_TIMESTAMP_HEADER, "value": str(2**62).encode()}
    assert out.column(4).to_pylist() == [
        [*given, note],
        None,
        [{"key": ORIGINAL_TIMESTAMP_HEADER, "value": str(-(2**63)).encode()}],
        [{"key": ORIGINAL_TIMESTAMP_HEADER, "value": str(MAX_WRITABLE_MS + 1).encode()}],
    ]
    assert out.column(3).to_pylist() == [b"v"] * 4  # the rest of each record as it was
