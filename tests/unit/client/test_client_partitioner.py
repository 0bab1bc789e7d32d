"""The producer's partitioner: Kafka's choice for keys, stickiness for null keys."""

from __future__ import annotations

import random
import warnings

import pyarrow as pa
import pytest

from logformat.partitioner import murmur2_array
from tierlog.client.partitioner import Partitioner

with warnings.catch_warnings():  # kafka-python's import emits importlib deprecation noise
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_murmur2


def test_keyed_records_go_where_kafka_puts_them() -> None:
    part = Partitioner()
    rng = random.Random(7)
    for _ in range(2000):
        key = rng.randbytes(rng.randrange(0, 40))
        n = rng.randrange(1, 50)
        # Kafka's DefaultPartitioner: toPositive(murmur2(key)) % n.
        assert part.partition("t", key, n) == (kafka_murmur2(key) & 0x7FFFFFFF) % n


def test_explicit_partition_wins_and_is_range_checked() -> None:
    part = Partitioner()
    assert part.partition("t", b"key", 8, explicit=5) == 5
    assert part.partition("t", None, 8, explicit=0) == 0
    with pytest.raises(ValueError, match="does not exist"):
        part.partition("t", b"key", 8, explicit=8)


def test_null_keys_stick_until_their_batch_closes() -> None:
    part = Partitioner(random.Random(1))
    first = {part.partition("t", None, 6) for _ in range(500)}
    assert len(first) == 1
    (p,) = first
    part.batch_closed("t", (p + 1) % 6)  # another partition's batch: no switch
    assert part.partition("t", None, 6) == p
    part.batch_closed("other-topic", p)  # another topic's: no switch
    assert part.partition("t", None, 6) == p
    part.batch_closed("t", p)
    q = part.partition("t", None, 6)
    assert q != p  # moves to a different partition
    assert {part.partition("t", None, 6) for _ in range(100)} == {q}


def test_null_keys_spread_over_batches() -> None:
    part = Partitioner(random.Random(3))
    seen = set()
    for _ in range(200):
        p = part.partition("t", None, 4)
        seen.add(p)
        part.batch_closed("t", p)
    assert seen == {0, 1, 2, 3}


def test_single_partition_topic() -> None:
    part = Partitioner()
    for _ in range(5):
        assert part.partition("t", None, 1) == 0
        part.batch_closed("t", 0)


def test_murmur2_over_a_whole_column_matches_kafka() -> None:
    rng = random.Random(5)
    keys = [rng.randbytes(rng.randrange(0, 40)) for _ in range(3000)]
    keys += [b"21", b"foobar", b"a-little-bit-long-string", b"abc", b""]
    # Chunked, sliced and with nulls: the kernels must honour Arrow's offsets.
    column = pa.chunked_array([pa.array([None, *keys[:1000]], pa.binary()).slice(1), keys[1000:]])
    got = murmur2_array(column).to_pylist()
    assert got == [kafka_murmur2(k) & 0xFFFFFFFF for k in keys]
    # Kafka's own test vectors (UtilsTest.testMurmur2), as signed Java ints.
    signed = [h - (1 << 32) if h >= 1 << 31 else h for h in got[-5:-1]]
    assert signed == [-973932308, -790332482, -985981536, 479470107]
    assert murmur2_array(pa.array([None, b"x"], pa.binary())).to_pylist()[1] == got_one(b"x")


def got_one(key: bytes) -> int:
    return int(kafka_murmur2(key)) & 0xFFFFFFFF
