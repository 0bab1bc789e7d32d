"""Kafka's group admin APIs (ListGroups, DescribeGroups, DeleteGroups, OffsetDelete) on the
same group rows as HTTP groups: what they show and what OffsetDelete may delete.

Kafka's group states: Empty (no live member), PreparingRebalance (members are rejoining),
CompletingRebalance (the round closed, the leader has not assigned yet), Stable, Dead (no
such group). A client-assigned group (groups/client_assigned.py) is in its round's phase; a
server-assigned one is Stable once every member holds its target, else PreparingRebalance.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster.kafka_groups import GroupDescription, MemberDescription
from groups import reconcile
from groups.client_assigned import JOINING, SYNCING
from groups.coordinator import _Draft
from metadata.types import ConsumerGroupMember, GroupSnapshot, GroupWrite, TopicNamePartition

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
)
CONSUMER = "consumer"  # every group here is a consumer group (Kafka's protocol type)
_CONSUMER_STATES = {
    reconcile.EMPTY: "Empty",
    reconcile.RECONCILING: "Reconciling",
    reconcile.STABLE: "Stable",
}


def summary_state(state: str, members: int) -> str:
    """Kafka's name for a listed group's state (groups/reconcile.py's states)."""
    if members == 0:
        return EMPTY
    return STABLE if state == reconcile.STABLE else PREPARING


def _state(d: _Draft) -> str:
    if not d.members:
        return EMPTY
    kafka = d.group.kafka
    if kafka is not None and all(m.kafka is not None for m in d.members.values()):
        return {JOINING: PREPARING, SYNCING: COMPLETING}.get(kafka.phase, STABLE)
    settled = reconcile.group_state(d.members.values()) == reconcile.STABLE
    return STABLE if settled else PREPARING


def _member(m: ConsumerGroupMember, protocol: str) -> MemberDescription:
    metadata = dict(m.kafka.protocols).get(protocol) if m.kafka else None
    assignment = m.kafka.assignment if m.kafka else None
    partitions = tuple(sorted(reconcile.to_set(m.assigned)))
    target = tuple(sorted(reconcile.to_set(m.target)))
    return MemberDescription(
        m.member_id, m.topics, metadata, assignment, partitions, m.member_epoch, target
    )


def describe(name: str, snap: GroupSnapshot | None) -> GroupDescription:
    """The group as DescribeGroups shows it (lapsed members left out); Dead if none."""
    if snap is None:
        return GroupDescription(name, DEAD, "", (), -1, "Dead")
    d = _Draft(snap)
    d.expire()
    kafka = d.group.kafka
    client_assigned = kafka is not None and all(m.kafka for m in d.members.values())
    protocol = (kafka.protocol if client_assigned and kafka else None) or d.group.assignor
    members = tuple(_member(m, protocol) for _, m in sorted(d.members.items()))
    consumer_state = _CONSUMER_STATES[reconcile.group_state(d.members.values())]
    classic = bool(d.members) and all(m.kafka is not None for m in d.members.values())
    return GroupDescription(
        name,
        _state(d),
        protocol if members else "",
        members,
        d.group.group_epoch,
        consumer_state,
        classic,
    )


def delete_offsets(
    snap: GroupSnapshot, partitions: Sequence[TopicNamePartition]
) -> tuple[GroupWrite, dict[TopicNamePartition, str | None]]:
    """Kafka's OffsetDelete: a live member's subscription keeps its topics' offsets
    (GROUP_SUBSCRIBED_TO_TOPIC); an unknown partition is UNKNOWN_TOPIC_OR_PARTITION; the rest
    are deleted (a partition with nothing committed is no error)."""
    d = _Draft(snap)
    d.expire()
    subscribed = {t for m in d.members.values() for t in m.topics}
    answers: dict[TopicNamePartition, str | None] = {}
    deleted: list[tuple[str, int]] = []
    for tp in partitions:
        meta = snap.topics.get(tp.topic)
        if meta is None or not 0 <= tp.partition < meta.partitions:
            answers[tp] = "UNKNOWN_TOPIC_OR_PARTITION"
        elif tp.topic in subscribed:
            answers[tp] = "GROUP_SUBSCRIBED_TO_TOPIC"
        else:
            answers[tp] = None
            deleted.append((meta.id, tp.partition))
    return d.finish()._replace(deleted_offsets=tuple(deleted)), answers
