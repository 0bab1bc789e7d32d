"""What bench/replay.py checks of every replay: dense offsets and a checksum of the values.

The producer side feeds each request's records to a `ValueDigest` and keeps the digest of the
topic's first n records for every request boundary n (a request is one frame and a frame never
spans segments, so the cold end — where the last sealed segment ends — is one of them). A
replay pass feeds every answer to a `PassCheck`: the offsets must run from the start offset
with no gap and no repeat, and at the end of the pass the digest of what it read must equal
the producer's digest for the same range. A mismatch raises `ReplayMismatch` with where and
what differed, which the benchmark turns into a non-zero exit.

The digest is two CRC-32s chained over the pass in offset order: one of the values' bytes,
one of their lengths (-1 for a null, so a tombstone differs from an empty value). A chained
CRC does not depend on how the records were cut into batches, and zlib computes it at GB/s
without a per-record Python loop, so checking does not throttle the replay it checks.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class ReplayMismatch(Exception):
    """A replay returned something other than the records produced."""


class Digest(NamedTuple):
    records: int
    values_crc: int
    lengths_crc: int


class ValueDigest:
    """The running digest of the values of records 0, 1, 2, ... fed in offset order."""

    def __init__(self) -> None:
        self.records = 0
        self._values = 0
        self._lengths = 0

    def update(self, values: pa.Array | pa.ChunkedArray) -> None:
        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        for arr in chunks:
            self._update_chunk(arr)

    def _update_chunk(self, arr: pa.Array) -> None:
        if len(arr) == 0:
            return
        if not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
            raise ReplayMismatch(f"value column is {arr.type}, not binary")
        lengths = pc.fill_null(pc.binary_length(arr), -1).cast(pa.int64())
        filled = pc.fill_null(arr, b"") if arr.null_count else arr  # a null's bytes are none
        width = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
        offsets = np.frombuffer(filled.buffers()[1], dtype=width)
        lo, hi = int(offsets[filled.offset]), int(offsets[filled.offset + len(filled)])
        data = filled.buffers()[2]
        if data is not None and hi > lo:
            self._values = zlib.crc32(memoryview(data)[lo:hi], self._values)
        self._lengths = zlib.crc32(lengths.to_numpy().tobytes(), self._lengths)
        self.records += len(arr)

    def digest(self) -> Digest:
        return Digest(self.records, self._values, self._lengths)


class ProducedDigests:
    """Digests of the first n records produced, for every request boundary n."""

    def __init__(self) -> None:
        self._running = ValueDigest()
        self.at: dict[int, Digest] = {0: self._running.digest()}

    def produced(self, values: pa.Array | pa.ChunkedArray) -> None:
        """Records of one request, in offset order, right after the previous ones."""
        self._running.update(values)
        d = self._running.digest()
        self.at[d.records] = d

    def of_prefix(self, end: int) -> Digest:
        if end not in self.at:
            raise ReplayMismatch(
                f"no producer digest for offsets [0, {end}): {end} is not a request boundary"
            )
        return self.at[end]


class PassCheck:
    """One replay pass over [start, end): feed it each answer's table, then call finish()."""

    def __init__(self, name: str, start: int, end: int, produced: ProducedDigests) -> None:
        if start != 0:
            raise ValueError("producer digests cover prefixes: a checked pass starts at 0")
        self.name = name
        self.end = end
        self.next = start
        self.produced = produced
        self._digest = ValueDigest()

    def answer(self, table: pa.Table, asked: int, next_offset: int) -> int:
        """Check an answer to a fetch at `asked` whose next-offset header said `next_offset`;
        returns where the pass continues (at most the end)."""
        if asked != self.next:
            raise ReplayMismatch(f"{self.name}: asked at {asked}, expected {self.next}")
        hi = min(next_offset, self.end)
        if hi <= asked:
            raise ReplayMismatch(
                f"{self.name}: the fetch at {asked} made no progress (next offset {next_offset})"
            )
        offsets = table.column("offset")
        if table.num_rows > hi - asked:  # records past the end (the hot tail): not this pass's
            table = table.filter(pc.less(offsets, hi))
            offsets = table.column("offset")
        got = offsets.to_numpy()
        if not np.array_equal(got, np.arange(asked, hi)):
            raise ReplayMismatch(
                f"{self.name}: offsets not dense in the answer at {asked}: "
                f"{_describe(got, asked, hi)}"
            )
        self._digest.update(table.column("value"))
        self.next = hi
        return hi

    def finish(self) -> None:
        """The pass reached the end and read what was produced."""
        if self.next != self.end:
            raise ReplayMismatch(f"{self.name}: the pass stopped at {self.next}, not {self.end}")
        want, got = self.produced.of_prefix(self.end), self._digest.digest()
        if got != want:
            raise ReplayMismatch(
                f"{self.name}: the values of offsets [0, {self.end}) differ from those "
                f"produced (checksum {got.values_crc:08x}/{got.lengths_crc:08x}, "
                f"produced {want.values_crc:08x}/{want.lengths_crc:08x})"
            )


def _describe(got: np.ndarray, lo: int, hi: int) -> str:
    """Where the offsets of an answer first differ from lo..hi-1."""
    want = np.arange(lo, hi)
    n = min(len(got), len(want))
    bad = np.nonzero(got[:n] != want[:n])[0]
    if len(bad):
        i = int(bad[0])
        return f"offset {int(got[i])} where {int(want[i])} was due ({len(got)} records)"
    return f"{len(got)} records where {hi - lo} were due (offsets {lo}..{hi - 1})"
