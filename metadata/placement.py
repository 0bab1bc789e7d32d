"""Replica placement: Kafka's rack-unaware assignment (AdminUtils.assignReplicasToBrokers).

Leaders spread round-robin from a random broker; followers of each partition are shifted by
an amount that changes every len(brokers) partitions, so replicas spread evenly too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    start_partition: int = 0,
    start_index: int | None = None,
    shift: int | None = None,
    rng: random.Random | None = None,
) -> list[list[int]]:
    """Replica lists (leader first) for partitions start_partition .. start_partition+partitions.

    Callers check replication_factor <= len(brokers). For added partitions pass the topic's
    existing count as start_partition and partition 0's leader index as start_index, as
    Kafka does, so the new ones continue the same rotation.
    """
    ids = sorted(brokers)
    n = len(ids)
    if not 1 <= replication_factor <= n:
        raise ValueError(f"replication factor {replication_factor} with {n} brokers")
    rng = rng or random.Random()
    start = rng.randrange(n) if start_index is None else start_index
    next_shift = rng.randrange(n) if shift is None else shift
    out: list[list[int]] = []
    for p in range(start_partition, start_partition + partitions):
        if p > 0 and p % n == 0:
            next_shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        replicas += [
            ids[_replica_index(first, next_shift, j, n)] for j in range(replication_factor - 1)
        ]
        out.append(replicas)
    return out
