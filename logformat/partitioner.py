"""Kafka's default partitioner: murmur2 for keyed records, sticky for null keys (docs/design.md §1).

`murmur2` is bit-for-bit `org.apache.kafka.common.utils.Utils.murmur2` (a signed 32-bit
result, as Java returns it), so a key lands on the partition a Kafka client would pick:
`to_positive(murmur2(key)) % num_partitions`.

Null keys use KIP-480 stickiness: all null-key records go to one partition until a batch is
done (`on_batch_done()`, or `records_per_stick` records were handed out), then the
partitioner moves to a different, random partition. Keep one `StickyPartitioner` per topic.
"""

from __future__ import annotations

import random
import struct
import sys
import threading
from collections.abc import Sequence
from itertools import repeat

import pyarrow as pa
import pyarrow.compute as pc

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_word_structs: dict[int, struct.Struct] = {}

DEFAULT_RECORDS_PER_STICK = 16384


def _words(n4: int) -> struct.Struct:
    s = _word_structs.get(n4)
    if s is None:
        s = struct.Struct(f"<{n4}I")
        if len(_word_structs) < 1024:  # bound the cache; long keys are rare
            _word_structs[n4] = s
    return s


def _murmur2_u32(data: bytes | bytearray | memoryview) -> int:
    """Kafka's murmur2 of `data` as an unsigned 32-bit int: the one implementation, shared by
    `murmur2` and the per-record loop of `assign_partitions`."""
    m = _M
    mask = _MASK
    length = len(data)
    h = _SEED ^ length
    n4 = length >> 2
    if n4:
        # All little-endian words at once (no per-byte Python work), with the cached struct
        # read straight from the dict: calling _words() per key costs as much as the hash.
        for k in (_word_structs.get(n4) or _words(n4)).unpack_from(data):
            k = (k * m) & mask
            k ^= k >> 24
            h = ((h * m) ^ (k * m)) & mask  # one mask: masking commutes with xor
    rest = length & 3
    if rest:
        tail = length & ~3
        if rest == 3:
            h ^= data[tail + 2] << 16
        if rest >= 2:
            h ^= data[tail + 1] << 8
        h = ((h ^ data[tail]) * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    return h ^ (h >> 15)


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's murmur2 of `data`, as a signed 32-bit int (Java's `int`)."""
    h = _murmur2_u32(data)
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's `Utils.toPositive`: clear the sign bit (not abs(), which differs for MIN_VALUE)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key."""
    # murmur2's unsigned 32-bit value & 0x7fffffff equals to_positive(signed value).
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """KIP-480 sticky choice for null-key records; one instance per topic.

    `partition(n)` hands out the current partition (counting one record) and
    `take(count, n)` hands out `count` records at once. The partition changes after
    `records_per_stick` records or on `on_batch_done()`. A lock makes it safe from threads;
    under asyncio no method awaits, so each call is atomic anyway.
    """

    def __init__(
        self, records_per_stick: int = DEFAULT_RECORDS_PER_STICK, rng: random.Random | None = None
    ) -> None:
        if records_per_stick <= 0:
            raise ValueError("records_per_stick must be positive")
        self.records_per_stick = records_per_stick
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._current = -1
        self._num_partitions = 0
        self._used = 0

    def _next(self, num_partitions: int) -> None:
        # A different partition than the last one, when there is a choice (as Kafka does).
        prev = self._current
        if num_partitions == 1:
            p = 0
        elif 0 <= prev < num_partitions:
            p = self._rng.randrange(num_partitions - 1)
            if p >= prev:
                p += 1
        else:
            p = self._rng.randrange(num_partitions)
        self._current = p
        self._num_partitions = num_partitions
        self._used = 0

    def partition(self, num_partitions: int) -> int:
        """The partition for one null-key record."""
        return self.take(1, num_partitions)[0]

    def take(self, count: int, num_partitions: int) -> list[int]:
        """Partitions for `count` consecutive null-key records (runs of sticky partitions)."""
        if num_partitions <= 0:
            raise ValueError("num_partitions must be positive")
        out: list[int] = []
        with self._lock:
            while count > 0:
                if self._num_partitions != num_partitions or self._used >= self.records_per_stick:
                    self._next(num_partitions)
                run = min(count, self.records_per_stick - self._used)
                out += [self._current] * run
                self._used += run
                count -= run
        return out

    def on_batch_done(self) -> None:
        """The current batch was sent: the next null-key record picks a new partition."""
        with self._lock:
            self._used = self.records_per_stick

    @property
    def current(self) -> int:
        """The partition null-key records go to now (-1 before the first one)."""
        return self._current


def partitions_for_keys(
    keys: Sequence[bytes | None], num_partitions: int, sticky: StickyPartitioner | None = None
) -> list[int]:
    """Partition of each key; null keys take sticky partitions (a fresh sticky if none given)."""
    return assign_partitions(keys, None, num_partitions, sticky)


def assign_partitions(
    keys: Sequence[bytes | None],
    explicit: Sequence[int | None] | None,
    num_partitions: int,
    sticky: StickyPartitioner | None = None,
) -> list[int]:
    """Kafka's rule per record: explicit partition wins, else murmur2(key), else sticky.

    Explicit partitions are not range-checked here (the caller knows the topic and decides
    the error); everything else is in [0, num_partitions).
    """
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    n = num_partitions
    out: list[int] = [0] * len(keys)
    nulls: list[int] = []
    u32 = _murmur2_u32  # a local: this loop is the keyed hot path
    chosen = repeat(None, len(keys)) if explicit is None else explicit
    for i, (key, p) in enumerate(zip(keys, chosen, strict=True)):
        if p is not None:
            out[i] = p
        elif key is None:
            nulls.append(i)
        else:
            out[i] = (u32(key) & 0x7FFFFFFF) % n
    if nulls:
        sticky_partitions = (sticky or StickyPartitioner()).take(len(nulls), n)
        for i, sp in zip(nulls, sticky_partitions, strict=True):
            out[i] = sp
    return out


def murmur2_array(keys: pa.Array | pa.ChunkedArray) -> pa.UInt32Array:
    """Kafka's murmur2 (unsigned) of every non-null key at once, in Arrow compute kernels:
    a few passes per 4-byte word of the longest key instead of Python per key. Null keys
    get 0 (the caller places them). Matches `_murmur2_u32` bit for bit."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    keys = pc.fill_null(keys.cast(pa.binary()), b"")
    if sys.byteorder != "little":  # Arrow views words in native order; Kafka reads LE
        return pa.array([_murmur2_u32(k) for k in keys.to_pylist()], pa.uint32())
    lengths = pc.binary_length(keys).cast(pa.uint32())
    h = pc.bit_wise_xor(lengths, _u32(_SEED))
    longest = pc.max(lengths).as_py() or 0
    for w in range(longest // 4):
        has = pc.greater_equal(lengths, 4 * (w + 1))
        k = _fixed_width(pc.binary_slice(keys.filter(has), 4 * w, 4 * w + 4), pa.uint32())
        k = _mul(k)
        k = _mul(pc.bit_wise_xor(k, pc.shift_right(k, _u32(24))))
        hw = pc.bit_wise_xor(_mul(h.filter(has)), k)
        h = pc.replace_with_mask(h, has, hw)
    rest = pc.bit_wise_and(lengths, _u32(3))
    for r in (1, 2, 3):
        has = pc.equal(rest, r)
        tails, hr = keys.filter(has), h.filter(has)
        for i in range(r - 1, -1, -1):  # the tail's bytes, last first: byte i << 8 * i
            one = pc.binary_slice(tails, i - r, (i - r + 1) or None)
            byte = _fixed_width(one, pa.uint8()).cast(pa.uint32())
            hr = pc.bit_wise_xor(hr, pc.shift_left(byte, _u32(8 * i)))
        h = pc.replace_with_mask(h, has, _mul(hr))
    h = pc.bit_wise_xor(h, pc.shift_right(h, _u32(13)))
    h = _mul(h)
    out: pa.UInt32Array = pc.bit_wise_xor(h, pc.shift_right(h, _u32(15)))
    return out


def _u32(n: int) -> pa.Scalar:
    return pa.scalar(n, pa.uint32())


def _mul(a: pa.Array) -> pa.Array:
    return pc.multiply(a, _u32(_M))  # wraps modulo 2**32, as Java's int multiply


def _fixed_width(sliced: pa.Array, typ: pa.DataType) -> pa.Array:
    """Binary values of one length viewed as an array of `typ` (their bytes in a row)."""
    if len(sliced) == 0:
        return pa.array([], typ)
    _, offsets, data = sliced.buffers()
    at = 4 * sliced.offset  # int32 offsets (little-endian: checked by the caller)
    first = int.from_bytes(offsets.slice(at, 4).to_pybytes(), "little")
    total = pc.sum(pc.binary_length(sliced)).as_py()
    return pa.Array.from_buffers(
        typ, total // (typ.bit_width // 8), [None, data.slice(first, total)]
    )
