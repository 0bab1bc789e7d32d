"""tiering/segment_values.py: the values of a segment's records in an offset range, read
without the frames' other columns, are exactly those the Parquet writer reads."""

from __future__ import annotations

import pytest

from coldstore.parquet_writer import CorruptSegmentError, iter_consumer_batches
from logformat.frame import encode_frame
from logformat.records import build_batch
from tiering.segment_values import segment_values


def _segment() -> bytes:
    frames = []
    for base in range(0, 50, 10):  # five frames of ten records, some values null
        values: list[bytes | None] = [
            None if i % 7 == 0 else b"v%d" % i for i in range(base, base + 10)
        ]
        keys: list[bytes | None] = [b"k%d" % i for i in range(base, base + 10)]
        batch = build_batch(keys, values, [None] * 10, [None] * 10, 1_700_000_000_000)
        frames.append(bytes(encode_frame(batch, base_offset=base, compression="zstd")))
    return b"".join(frames)


@pytest.mark.parametrize("lo, hi", [(0, 50), (13, 37), (10, 20), (49, 60), (0, 1), (25, 25)])
def test_the_values_in_a_range_are_the_writers(lo: int, hi: int) -> None:
    segment = _segment()
    got = [v for a in segment_values(segment, lo, hi) for v in a.to_pylist()]
    want = [
        v for b in iter_consumer_batches(segment, lo, hi) for v in b.column("value").to_pylist()
    ]
    assert got == want
    assert len(got) == max(0, min(hi, 50) - lo)


def test_a_torn_frame_is_corruption_not_an_empty_answer() -> None:
    segment = _segment()
    with pytest.raises(CorruptSegmentError):
        list(segment_values(segment[:-5], 0, 50))
