"""Kafka's rack-unaware replica assignment, without a database."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from metadata.placement import assign_replicas


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf"), [(3, 30, 3), (3, 6, 2), (5, 50, 3), (4, 12, 1), (6, 60, 4)]
)
def test_leaders_and_replicas_spread_evenly(brokers: int, partitions: int, rf: int) -> None:
    for seed in range(20):
        ids = [10 + i for i in range(brokers)]
        out = assign_replicas(ids, partitions, rf, rng=random.Random(seed))
        assert len(out) == partitions
        for replicas in out:
            assert len(replicas) == rf and len(set(replicas)) == rf
            assert set(replicas) <= set(ids)
        leaders = Counter(r[0] for r in out)
        assert set(leaders.values()) == {partitions // brokers}
        counts = Counter(b for r in out for b in r)
        assert set(counts.values()) == {partitions * rf // brokers}


def test_matches_kafka_reference() -> None:
    # Kafka's AdminUtils with brokers 0..4, fixedStartIndex 0, startPartitionId 0 ->
    # the example in its javadoc (shift starts at 0 here).
    out = assign_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0, shift=0)
    assert out[:5] == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0], [4, 0, 1]]
    assert out[5:] == [[0, 2, 3], [1, 3, 4], [2, 4, 0], [3, 0, 1], [4, 1, 2]]


def test_added_partitions_continue_the_leader_rotation() -> None:
    whole = assign_replicas([1, 2, 3], 9, 2, start_index=1)
    tail = assign_replicas([1, 2, 3], 5, 2, start_partition=4, start_index=1)
    assert [r[0] for r in tail] == [r[0] for r in whole[4:]]


def test_rf_larger_than_brokers_is_a_caller_bug() -> None:
    with pytest.raises(ValueError):
        assign_replicas([1, 2], 1, 3)
