"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat and LeaveGroup: Kafka's classic group
protocol, served by the consumer groups the composition root gives the listener
(cluster/kafka_groups.py; groups/classic.py says how it maps onto HTTP groups).

Every broker coordinates every group (group state is in Postgres), so FindCoordinator names
the broker asked for a group; for a transactional id it names one broker, the same whoever
is asked (ingest/service/txn_placement.py). A group of Kafka clients only assigns as
Kafka's protocol says: JoinGroup names a leader and hands it every member's metadata, and
SyncGroup returns what the leader sent, byte for byte (groups/client_assigned.py). A group
with an HTTP member is assigned by the server: JoinGroup names no leader, and SyncGroup
returns each member's share as consumer-protocol bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as OneKeyRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.join_group.v7.request import JoinGroupRequest
from kio.schema.join_group.v7.response import JoinGroupResponse
from kio.schema.leave_group.v2.request import LeaveGroupRequest as OneMemberRequest
from kio.schema.leave_group.v4.request import LeaveGroupRequest
from kio.schema.leave_group.v4.response import LeaveGroupResponse
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.schema.sync_group.v5.response import SyncGroupResponse

from cluster.kafka_groups import (
    ClassicGroupError,
    ClassicGroups,
    Joined,
    JoinGroup,
    MemberAssignment,
)
from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import build, kafka_error, nested
from ingest.service.txn_placement import txn_coordinator_of
from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicNamePartition

T = TypeVar("T")
CONSUMER = "consumer"
NO_LEADER = ""  # no member runs an assignor: the server assigns (groups/classic.py)
KEY_GROUP, KEY_TRANSACTION = 0, 1


def group_error(exc: TierlogError | ClassicGroupError) -> KafkaError:
    if isinstance(exc, ClassicGroupError):
        return KafkaError[exc.kafka_name.lower()]
    return kafka_error(exc)


def groups_of(ctx: KafkaContext) -> ClassicGroups:
    if ctx.groups is None:
        raise TierlogError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE, "this broker serves no consumer groups"
        )
    return ctx.groups


async def attempt(call: Callable[[], Awaitable[T]]) -> tuple[T | None, KafkaError, str | None]:
    """(result, error, message) of a group call: Kafka answers errors in the body."""
    try:
        return await call(), KafkaError.none, None
    except (TierlogError, ClassicGroupError) as exc:
        return None, group_error(exc), exc.message


def _placed_coordinator(ctx: KafkaContext, key: str) -> tuple[int, tuple[str, int]]:
    """The broker every broker names for a transactional id or a group
    (ingest/service/txn_placement.py): one of the live brokers with a Kafka address, else
    this one. Groups too: any broker can act for any group (its state is in Postgres), but
    librdkafka asks FindCoordinator again every second, of any broker, and a changed answer
    makes it drop a JoinGroup in flight; a first join dropped so is joined again without a
    member id, and the first stays a member that never speaks (the round's leader, if first)
    until its session runs out (librdkafka's 45 s)."""
    live = {
        broker_id: address
        for broker_id, reg in ctx.services.metadata.brokers.items()
        if reg.alive and (address := ctx.kafka_address(broker_id)) is not None
    }
    chosen = txn_coordinator_of(key, live)
    if chosen is None:
        return ctx.services.config.broker_id, ctx.advertised
    return chosen, live[chosen]


def _coordinator(ctx: KafkaContext, key: str, key_type: int) -> dict[str, object]:
    host, port = ctx.advertised
    fields: dict[str, object] = {"key": key, "node_id": ctx.services.config.broker_id}
    fields.update(host=host, port=port, error_code=KafkaError.none, error_message=None)
    if key_type == KEY_TRANSACTION:
        node_id, (host, port) = _placed_coordinator(ctx, key)
        fields.update(node_id=node_id, host=host, port=port)
        return fields
    if key_type != KEY_GROUP:
        message = f"coordinator key type {key_type} is unknown: 0 (group) or 1 (transaction)"
        fields.update(error_code=KafkaError.invalid_request, error_message=message)
        fields.update(node_id=-1, host="", port=-1)
    elif ctx.groups is None:
        message = "this broker serves no consumer groups"
        fields.update(error_code=KafkaError.coordinator_not_available, error_message=message)
    elif not ctx.allowed("group", key, "describe"):
        message = f"{ctx.principal} may not describe group {key!r}"
        fields.update(error_code=KafkaError.group_authorization_failed, error_message=message)
    else:
        node_id, (host, port) = _placed_coordinator(ctx, key)
        fields.update(node_id=node_id, host=host, port=port)
    return fields


async def handle_find_coordinator(
    ctx: KafkaContext,
    request: FindCoordinatorRequest | OneKeyRequest,  # v0-3 name one key
    response_cls: type[FindCoordinatorResponse],
) -> FindCoordinatorResponse:
    key_type = getattr(request, "key_type", KEY_GROUP)
    if hasattr(request, "coordinator_keys"):  # v4+: a batch of keys
        cls = nested(response_cls, "Coordinator")
        coordinators = tuple(
            build(cls, **_coordinator(ctx, k, key_type)) for k in request.coordinator_keys
        )
        return build(response_cls, throttle_time=NO_THROTTLE, coordinators=coordinators)
    fields = _coordinator(ctx, request.key, key_type)
    return build(response_cls, throttle_time=NO_THROTTLE, **fields)


def _join_request(request: JoinGroupRequest) -> JoinGroup:
    if request.protocol_type != CONSUMER:
        raise ClassicGroupError(
            "INCONSISTENT_GROUP_PROTOCOL",
            f"protocol type {request.protocol_type!r} is not served (only {CONSUMER!r})",
        )
    topics: set[str] = set()
    owned: set[TopicNamePartition] = set()
    for protocol in request.protocols:
        sub = decode_subscription(protocol.metadata)
        topics.update(sub.topics)
        owned.update(sub.owned)
    if not topics:
        raise TierlogError(ErrorCode.INVALID_REQUEST, "the subscription names no topic")
    return JoinGroup(
        member_id=request.member_id,
        topics=tuple(sorted(topics)),
        owned=frozenset(owned),
        assignors=tuple(p.name for p in request.protocols),
        session_timeout_ms=_ms(request.session_timeout),
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        # v0 has no rebalance timeout: Kafka uses the session timeout
        rebalance_timeout_ms=_ms(getattr(request, "rebalance_timeout", request.session_timeout)),
    )


def _ms(delta: timedelta) -> int:
    return int(delta.total_seconds() * 1000)


async def handle_join_group(
    ctx: KafkaContext, request: JoinGroupRequest, response_cls: type[JoinGroupResponse]
) -> JoinGroupResponse:
    async def join() -> Joined:
        ctx.require("group", request.group_id, "read")
        return await groups_of(ctx).join(request.group_id, _join_request(request))

    joined, error, _ = await attempt(join)
    fields: dict[str, object] = {"throttle_time": NO_THROTTLE, "error_code": error}
    fields.update(protocol_type=CONSUMER, leader=NO_LEADER, members=())
    if joined is None:
        fields.update(generation_id=-1, protocol_name=None, member_id=request.member_id)
    else:
        fields.update(generation_id=joined.generation, protocol_name=joined.assignor)
        fields.update(member_id=joined.member_id, leader=joined.leader)
        cls = nested(response_cls, "JoinGroupResponseMember")
        fields["members"] = tuple(
            build(cls, member_id=m, group_instance_id=None, metadata=meta)
            for m, meta in joined.members
        )
    if response_cls.__version__ < 7 and fields["protocol_name"] is None:
        fields["protocol_name"] = ""  # not nullable before v7
    return build(response_cls, **fields)


async def handle_sync_group(
    ctx: KafkaContext, request: SyncGroupRequest, response_cls: type[SyncGroupResponse]
) -> SyncGroupResponse:
    async def sync() -> bytes:
        ctx.require("group", request.group_id, "read")
        assignments = tuple(
            MemberAssignment(a.member_id, a.assignment, decode_assignment(a.assignment))
            for a in request.assignments
        )
        got = await groups_of(ctx).sync(
            request.group_id, request.member_id, request.generation_id, assignments
        )
        return got.raw if got.raw is not None else encode_assignment(got.partitions)

    assignment, error, _ = await attempt(sync)
    return build(
        response_cls,
        throttle_time=NO_THROTTLE,
        error_code=error,
        protocol_type=CONSUMER,
        protocol_name=getattr(request, "protocol_name", None),
        assignment=assignment if assignment is not None else b"",
    )


async def handle_heartbeat(
    ctx: KafkaContext, request: HeartbeatRequest, response_cls: type[HeartbeatResponse]
) -> HeartbeatResponse:
    async def beat() -> None:
        ctx.require("group", request.group_id, "read")
        await groups_of(ctx).heartbeat(request.group_id, request.member_id, request.generation_id)

    _, error, _ = await attempt(beat)
    return build(response_cls, throttle_time=NO_THROTTLE, error_code=error)


async def handle_leave_group(
    ctx: KafkaContext,
    request: LeaveGroupRequest | OneMemberRequest,  # v0-2 name one member
    response_cls: type[LeaveGroupResponse],
) -> LeaveGroupResponse:
    group = request.group_id
    if not hasattr(request, "members"):  # v0-2: one member
        ids = [request.member_id]
    else:
        ids = [m.member_id for m in request.members]

    async def leave(member_id: str) -> None:
        ctx.require("group", group, "read")
        await groups_of(ctx).leave(group, member_id)

    answers = []
    for member_id in ids:
        _, error, _ = await attempt(functools.partial(leave, member_id))
        answers.append((member_id, error))
    if not hasattr(request, "members"):
        return build(response_cls, throttle_time=NO_THROTTLE, error_code=answers[0][1])
    cls = nested(response_cls, "MemberResponse")
    members = tuple(
        build(cls, member_id=m, group_instance_id=None, error_code=e) for m, e in answers
    )
    return build(
        response_cls, throttle_time=NO_THROTTLE, error_code=KafkaError.none, members=members
    )
