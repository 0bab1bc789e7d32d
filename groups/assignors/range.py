"""Kafka's RangeAssignor: per topic, consecutive ranges of partitions to members in id order.

For each topic, the members subscribed to it are sorted by id and the partitions, in order,
are cut into as many ranges; when they do not divide evenly, the first members get one more.
With C0, C1 and topics t0, t1 of 3 partitions each: C0 gets [t0p0, t0p1, t1p0, t1p1], C1
gets [t0p2, t1p2]. Partitions of one topic with the same number go to the same member, which
is what co-partitioned joins need; the price is imbalance across many topics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from groups.assignors.base import (
    Assignment,
    MemberSubscription,
    sorted_assignment,
)
from metadata.types import TopicNamePartition

NAME = "range"


def assign(members: Sequence[MemberSubscription], partitions: Mapping[str, int]) -> Assignment:
    out: dict[str, list[TopicNamePartition]] = {m.member_id: [] for m in members}
    by_topic: dict[str, list[str]] = {}
    for m in members:
        for topic in m.topics:
            by_topic.setdefault(topic, []).append(m.member_id)
    for topic, consumers in sorted(by_topic.items()):
        count = partitions.get(topic, 0)
        if count <= 0:
            continue  # not (yet) a topic: nothing to assign
        consumers.sort()
        per_member, extra = divmod(count, len(consumers))
        for i, member_id in enumerate(consumers):
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            out[member_id].extend(
                TopicNamePartition(topic, p) for p in range(start, start + length)
            )
    return sorted_assignment(out)
