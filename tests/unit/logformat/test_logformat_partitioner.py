"""The partitioner against an independent implementation (kafka-python) and Kafka's vectors."""

from __future__ import annotations

import itertools
import random
import threading
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logformat.partitioner import (
    StickyPartitioner,
    assign_partitions,
    murmur2,
    partition_for_key,
    partitions_for_keys,
    to_positive,
)

with warnings.catch_warnings():  # kafka-python's import emits importlib deprecation noise
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import DefaultPartitioner
    from kafka.partitioner.default import murmur2 as kafka_murmur2

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (Java's signed int results).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


class _Cluster:
    """Just enough of kafka-python's ClusterMetadata for DefaultPartitioner."""

    def __init__(self, n):
        self.n = n

    def topics(self):
        return {"t"}

    def partitions_for_topic(self, topic):
        return set(range(self.n))

    def available_partitions_for_topic(self, topic):
        return set(range(self.n))


def kafka_partition(key, n):
    return DefaultPartitioner().partition("t", key, key, None, None, _Cluster(n))


@pytest.mark.parametrize(("data", "expected"), list(KAFKA_VECTORS.items()))
def test_kafka_vectors(data, expected):
    assert murmur2(data) == expected
    assert kafka_murmur2(data) == expected & 0xFFFFFFFF  # the vectors agree with kafka-python


@settings(max_examples=1500, deadline=None)
@given(data=st.binary(max_size=64))
def test_murmur2_matches_kafka_python(data):
    got = murmur2(data)
    assert -(2**31) <= got < 2**31
    assert got & 0xFFFFFFFF == kafka_murmur2(data)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(min_size=65, max_size=5000))
def test_murmur2_matches_kafka_python_long(data):
    assert murmur2(data) & 0xFFFFFFFF == kafka_murmur2(data)


def test_every_length_and_buffer_type():
    rng = random.Random(1)
    for length in range(300):
        data = rng.randbytes(length)
        expected = murmur2(data)
        assert expected & 0xFFFFFFFF == kafka_murmur2(data)
        assert murmur2(bytearray(data)) == expected == murmur2(memoryview(data))


@settings(max_examples=500, deadline=None)
@given(key=st.binary(max_size=40), n=st.integers(1, 1000))
def test_partition_for_key_matches_kafka_default_partitioner(key, n):
    assert partition_for_key(key, n) == kafka_partition(key, n)


def test_string_keys_like_a_kafka_client():
    # A Kafka client's StringSerializer sends UTF-8 bytes.
    for key in ["user-1", "ключ", "🦄", ""]:
        data = key.encode()
        assert partition_for_key(data, 12) == kafka_partition(data, 12)


def test_to_positive():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), st.binary(max_size=30)), max_size=50))
def test_partitions_for_keys(keys):
    sticky = StickyPartitioner(rng=random.Random(0))
    got = partitions_for_keys(keys, 7, sticky)
    for key, p in zip(keys, got, strict=True):
        if key is None:
            assert p == sticky.current  # one batch: every null key sticks to one partition
        else:
            assert p == kafka_partition(key, 7)


def test_assign_partitions_explicit_wins():
    keys = [b"a", None, b"b", None]
    got = assign_partitions(keys, [5, 6, None, None], 3, StickyPartitioner(rng=random.Random(1)))
    assert got[:2] == [5, 6]  # not range-checked here
    assert got[2] == kafka_partition(b"b", 3)
    assert 0 <= got[3] < 3
    with pytest.raises(ValueError):
        assign_partitions(keys, None, 0)


def test_sticky_sticks_then_moves():
    sticky = StickyPartitioner(records_per_stick=3, rng=random.Random(7))
    first = [sticky.partition(10) for _ in range(3)]
    assert len(set(first)) == 1
    nxt = sticky.partition(10)
    assert nxt != first[0]  # a new batch goes to a different partition
    assert sticky.take(2, 10) == [nxt, nxt]
    sticky.on_batch_done()
    assert sticky.partition(10) != nxt


def test_sticky_take_runs_and_spread():
    sticky = StickyPartitioner(records_per_stick=4, rng=random.Random(3))
    got = sticky.take(40, 5)
    runs = [got[i : i + 4] for i in range(0, 40, 4)]
    assert all(len(set(r)) == 1 for r in runs)
    assert all(a[0] != b[0] for a, b in itertools.pairwise(runs))
    assert set(got) <= set(range(5))
    assert len(set(StickyPartitioner(records_per_stick=1).take(500, 5))) == 5


def test_sticky_single_partition_and_partition_count_change():
    sticky = StickyPartitioner(records_per_stick=2)
    assert sticky.take(5, 1) == [0] * 5
    sticky.on_batch_done()
    assert sticky.partition(1) == 0
    # More partitions (topic grew): re-pick within the new range.
    assert all(0 <= p < 50 for p in sticky.take(10, 50))
    with pytest.raises(ValueError):
        sticky.partition(0)
    with pytest.raises(ValueError):
        StickyPartitioner(records_per_stick=0)


def test_sticky_is_thread_safe():
    sticky = StickyPartitioner(records_per_stick=100)
    out: list[list[int]] = []

    def worker():
        out.append(sticky.take(1000, 8))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(x) for x in out) == 8000
    assert all(0 <= p < 8 for x in out for p in x)
