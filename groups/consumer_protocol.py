"""KIP-848's consumer group protocol (ConsumerGroupHeartbeat) for Kafka clients with
`group.protocol=consumer`, on the group coordinator HTTP groups use (groups/coordinator.py
already follows KIP-848: member epochs, owned partitions, server-side assignors, a partition
granted only once its previous owner released it).

What this adds is Kafka's framing: epoch 0 joins (under the member id a v1 client chose) or
rejoins, -1 and -2 leave, and Kafka's assignor names map onto the server's: `uniform` is the
balanced sticky assignor, `range` is range. Such a member is not a classic Kafka member, so
a group with one is server-assigned (groups/client_assigned.py).
"""

from __future__ import annotations

from cluster.kafka_groups import ConsumerAssigned, ConsumerHeartbeat
from groups import reconcile
from groups.coordinator import Assigned, GroupCoordinator
from groups.requests import HeartbeatRequest, JoinRequest
from logformat.errors import ErrorCode, TierlogError

LEAVE, STATIC_LEAVE = -1, -2
ASSIGNORS = {"uniform": "sticky", "range": "range"}  # Kafka's name -> the server's
SESSION_MS = 45_000  # Kafka's group.consumer.session.timeout.ms default


def _assignor(name: str | None) -> str | None:
    if name is None:
        return None
    if name not in ASSIGNORS:
        raise TierlogError(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"server assignor {name!r} is not served: use one of {', '.join(sorted(ASSIGNORS))}",
        )
    return ASSIGNORS[name]


def _answer(a: Assigned) -> ConsumerAssigned:
    return ConsumerAssigned(
        a.member_id,
        a.member_epoch,
        a.heartbeat_interval_ms,
        tuple(sorted(reconcile.to_set(a.assignment))),
    )


def heartbeat(coordinator: GroupCoordinator, group: str, hb: ConsumerHeartbeat) -> ConsumerAssigned:
    if hb.member_epoch in (LEAVE, STATIC_LEAVE):
        coordinator.leave(group, hb.member_id)
        return ConsumerAssigned(hb.member_id, LEAVE, 0, ())
    # Kafka's null owned partitions mean "unchanged", not "none": reading it as none would
    # grant a partition to its next owner while the member still consumes it.
    owned = None if hb.owned is None else frozenset(hb.owned)
    topics = None if hb.topics is None else tuple(sorted(set(hb.topics)))
    if hb.member_epoch == 0:
        if hb.member_id and coordinator.repo.read(group) is not None:
            try:  # a member that lost its state rejoins under its id
                return _answer(
                    coordinator.heartbeat(group, hb.member_id, HeartbeatRequest(0, owned, topics))
                )
            except TierlogError as exc:
                if exc.code is not ErrorCode.UNKNOWN_MEMBER_ID:
                    raise
        if topics is None:
            raise TierlogError(
                ErrorCode.INVALID_REQUEST, "a joining member must name its subscribed topics"
            )
        join = JoinRequest(topics, _assignor(hb.assignor), SESSION_MS, hb.member_id or None)
        return _answer(coordinator.join(group, join))
    if hb.member_epoch < 0:
        raise TierlogError(ErrorCode.INVALID_REQUEST, f"member epoch {hb.member_epoch}")
    req = HeartbeatRequest(hb.member_epoch, owned, topics)
    return _answer(coordinator.heartbeat(group, hb.member_id, req))
