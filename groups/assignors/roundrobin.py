"""Kafka's RoundRobinAssignor: all partitions in (topic, partition) order, dealt to members
in id order, skipping a member that does not subscribe to the partition's topic.

With equal subscriptions the counts differ by at most one: C0, C1 and t0, t1 of 3 partitions
each give C0 [t0p0, t0p2, t1p1] and C1 [t0p1, t1p0, t1p2]. With different subscriptions the
skipping can unbalance it (Kafka's javadoc: C0 on t0; C1 on t0, t1; C2 on t0, t1, t2 with 1, 2
and 3 partitions give C0 [t0p0], C1 [t1p0], C2 [t1p1, t2p0, t2p1, t2p2]).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from groups.assignors.base import (
    Assignment,
    MemberSubscription,
    sorted_assignment,
    subscribed_partitions,
)
from metadata.types import TopicNamePartition

NAME = "roundrobin"


def assign(members: Sequence[MemberSubscription], partitions: Mapping[str, int]) -> Assignment:
    out: dict[str, list[TopicNamePartition]] = {m.member_id: [] for m in members}
    ring = sorted(members, key=lambda m: m.member_id)
    at = 0  # the ring's cursor, kept across partitions and topics (Kafka's CircularIterator)
    for tp in subscribed_partitions(members, partitions):
        while tp.topic not in ring[at].topics:
            at = (at + 1) % len(ring)
        out[ring[at].member_id].append(tp)
        at = (at + 1) % len(ring)
    return sorted_assignment(out)
