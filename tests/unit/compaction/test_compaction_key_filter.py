"""The bloom filter lookup erasure uses to skip cold files (coldstore/key_filter.py): every key
a file holds is found in the filter pyarrow wrote; keys it does not hold rarely are."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from coldstore.key_filter import bloom_bitset, bloom_may_contain
from coldstore.parquet_writer import KEY_BLOOM_FILTER


def test_written_bloom_filters_hold_every_key_and_few_others() -> None:
    keys = [f"user-{i}".encode() for i in range(6000)] + [b"\x00\xff binary"]
    table = pa.table({"key": pa.array(keys, pa.binary()), "n": pa.array(range(len(keys)))})
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        bloom_filter_options=KEY_BLOOM_FILTER,
        use_dictionary=["key"],
        row_group_size=3000,
    )
    data = sink.getvalue().to_pybytes()
    meta = pq.read_metadata(pa.BufferReader(data))
    assert meta.num_row_groups == 3
    for rg in range(meta.num_row_groups):
        chunk = meta.row_group(rg).column(0)
        start = chunk.bloom_filter_offset
        bitset = bloom_bitset(data[start : start + chunk.bloom_filter_length])
        assert bitset is not None
        held = keys[rg * 3000 : (rg + 1) * 3000]
        assert all(bloom_may_contain(bitset, k) for k in held)
        false = sum(bloom_may_contain(bitset, b"other-%d" % i) for i in range(10_000))
        assert false < 300  # < 3% (configured 2%)


def test_unreadable_filters_are_not_trusted() -> None:
    assert bloom_bitset(b"") is None
    assert bloom_bitset(b"\x16\x00") is None  # not numBytes first
    assert bloom_bitset(b"\x15\x80\x04" + b"\x00" * 10) is None  # claims 256 bytes, has 10
