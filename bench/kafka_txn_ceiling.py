"""The client's own ceiling for bench/kafka_txn.py: the same producer, records and cases
against librdkafka's mock cluster (`test.mock.num.brokers`), a broker that lives inside a
client process, in C, keeps records in memory and answers at once (no disk, no replication,
no Postgres; it writes no commit/abort markers either). What the one producer of the cases
reaches there is what a broker that cost nothing would let it reach on this machine, so the
transactional case's share of the idempotent one there bounds what any broker can show.

bench/kafka_txn.py runs its rounds in the same run, interleaved with tierlog's (the
machine's load moves both), and reads each round's topic back: it must hold exactly the
records sent (read_uncommitted: the mock filters nothing for read_committed).
"""

from __future__ import annotations

import time
from typing import NamedTuple

from confluent_kafka import Producer


class MockCluster(NamedTuple):
    owner: Producer  # the cluster lives as long as this client
    bootstrap: str


def start() -> MockCluster:
    owner = Producer({"test.mock.num.brokers": 1})
    brokers = list(owner.list_topics(timeout=10).brokers.values())
    return MockCluster(owner, f"{brokers[0].host}:{brokers[0].port}")


def create(mock: MockCluster, topic: str, partitions: int) -> None:
    """The mock cluster creates a topic on the first Metadata request that names it, with its
    default partition count (4 in librdkafka): checked, not assumed."""
    deadline = time.monotonic() + 10
    while True:
        found = mock.owner.list_topics(topic, timeout=10).topics.get(topic)
        got = 0 if found is None or found.error is not None else len(found.partitions)
        if got == partitions:
            return
        if got or time.monotonic() > deadline:
            raise SystemExit(
                f"the mock cluster made {got} partitions of {topic}, the cases need {partitions}"
            )
        time.sleep(0.05)
