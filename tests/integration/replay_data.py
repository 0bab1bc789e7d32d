"""A deterministic topic for replay tests and benchmarks: record i is a pure function of i,
built and checked a whole range at a time (vectorized), so a million records never need to
be kept in memory to be compared."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

T0 = int(time.time() * 1000) - 24 * 3600_000  # a day ago: local retention may delete at once
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _splitmix(x: np.ndarray) -> np.ndarray:
    """SplitMix64: every word independent-looking, so values do not compress (as real
    payloads after a producer's own compression would not)."""
    with np.errstate(over="ignore"):
        z = x + _MIX
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _binary(raw: np.ndarray, width: int) -> pa.Array:
    fixed = pa.Array.from_buffers(pa.binary(width), len(raw), [None, pa.py_buffer(raw.tobytes())])
    return fixed.cast(pa.binary())


def records(lo: int, hi: int, value_bytes: int = 16) -> pa.Table:
    """Records lo..hi-1: key = i (8 bytes, big-endian), value = i mixed into `value_bytes`
    bytes (every 101st a tombstone), timestamp = T0 + i // 100 ms."""
    i = np.arange(lo, hi, dtype=np.uint64)
    keys = _binary(i.astype(">u8"), 8)
    words = -(-value_bytes // 8)
    mixed = np.empty((len(i), words), dtype="<u8")
    for w in range(words):
        mixed[:, w] = _splitmix(i * np.uint64(words) + np.uint64(w))
    values = _binary(mixed.view(np.uint8)[:, :value_bytes].copy(), value_bytes)
    tombstone = pa.array((i % np.uint64(101)) == 0)
    values = pa.compute.if_else(tombstone, pa.scalar(None, pa.binary()), values)
    stamps = pa.array((np.int64(T0) + (i // np.uint64(100)).astype(np.int64)), pa.int64())
    return pa.table(
        {"key": keys, "value": values, "timestamp": stamps.cast(pa.timestamp("ms", tz="UTC"))}
    )


def arrow_body(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def check(table: pa.Table, lo: int) -> None:
    """Assert that `table` (a fetch result) is exactly records lo..lo+n-1, byte for byte."""
    n = table.num_rows
    want = records(lo, lo + n)
    offsets = table.column("offset").to_numpy()
    assert np.array_equal(offsets, np.arange(lo, lo + n)), (lo, offsets[:5])
    for name in ("key", "value", "timestamp"):
        got = table.column(name).combine_chunks()
        assert got.equals(want.column(name).combine_chunks()), (name, lo)
    assert table.column("headers").null_count == n
