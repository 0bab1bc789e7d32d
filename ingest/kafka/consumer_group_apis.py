"""ConsumerGroupHeartbeat and ConsumerGroupDescribe: KIP-848's consumer group protocol
(`group.protocol=consumer`), on the consumer groups the listener is given
(groups/consumer_protocol.py has the rules). This module maps topic ids to names and back,
and Kafka's answers: the member's epoch, its heartbeat interval and its assignment, or the
error (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, UNSUPPORTED_ASSIGNOR...) with a message. READ
on the group is needed to heartbeat, DESCRIBE to describe, as in Kafka.
"""

from __future__ import annotations

import functools
import uuid
from datetime import timedelta

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_describe.v1.response import Assignment as DescribedAssignment
from kio.schema.consumer_group_describe.v1.response import (
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
)
from kio.schema.consumer_group_describe.v1.response import (
    TopicPartitions as DescribedPartitions,
)
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.consumer_group_heartbeat.v1.response import Assignment as HeartbeatAssignment
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse
from kio.schema.consumer_group_heartbeat.v1.response import (
    TopicPartitions as AssignedPartitions,
)
from kio.schema.errors import ErrorCode as KafkaError
from kio.static.primitive import i32

from cluster.kafka_groups import (
    ConsumerAssigned,
    ConsumerHeartbeat,
    GroupDescription,
    MemberDescription,
)
from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.group_apis import attempt, groups_of
from ingest.kafka.protocol import build, nested
from metadata.types import TopicNamePartition


def _owned(
    ctx: KafkaContext, request: ConsumerGroupHeartbeatRequest
) -> tuple[TopicNamePartition, ...] | None:
    if request.topic_partitions is None:
        return None
    names = {v.info.id: v.info.name for v in ctx.services.metadata.topics()}
    return tuple(
        TopicNamePartition(names[str(tp.topic_id)], int(p))
        for tp in request.topic_partitions
        if str(tp.topic_id) in names  # a deleted topic's partitions are not held
        for p in tp.partitions
    )


def _assignment(
    ctx: KafkaContext, response_cls: type[ConsumerGroupHeartbeatResponse], got: ConsumerAssigned
) -> HeartbeatAssignment:
    by_topic: dict[str, list[int]] = {}
    for tp in got.assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    cls = nested(response_cls, AssignedPartitions)
    topics = []
    for name, partitions in sorted(by_topic.items()):
        view = ctx.services.metadata.topic(name)
        if view is not None:
            topics.append(
                build(
                    cls,
                    topic_id=uuid.UUID(view.info.id),
                    partitions=tuple(i32(p) for p in partitions),
                )
            )
    return build(nested(response_cls, HeartbeatAssignment), topic_partitions=tuple(topics))


async def handle_consumer_group_heartbeat(
    ctx: KafkaContext,
    request: ConsumerGroupHeartbeatRequest,
    response_cls: type[ConsumerGroupHeartbeatResponse],
) -> ConsumerGroupHeartbeatResponse:
    hb = ConsumerHeartbeat(
        member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        topics=None
        if request.subscribed_topic_names is None
        else tuple(request.subscribed_topic_names),
        assignor=request.server_assignor,
        owned=_owned(ctx, request),
    )

    async def beat() -> ConsumerAssigned:
        ctx.require("group", request.group_id, "read")
        return await groups_of(ctx).consumer_heartbeat(request.group_id, hb)

    got, error, message = await attempt(beat)
    fields: dict[str, object] = {"throttle_time": NO_THROTTLE, "error_code": error}
    fields.update(error_message=message, heartbeat_interval=timedelta(0), assignment=None)
    if got is None:
        fields.update(member_id=request.member_id or None, member_epoch=i32(-1))
    else:
        fields.update(member_id=got.member_id, member_epoch=i32(got.member_epoch))
        fields["heartbeat_interval"] = timedelta(milliseconds=got.heartbeat_interval_ms)
        if got.member_epoch >= 0:
            fields["assignment"] = _assignment(ctx, response_cls, got)
    return build(response_cls, **fields)


def _described_assignment(
    ctx: KafkaContext,
    response_cls: type[ConsumerGroupDescribeResponse],
    partitions: tuple[TopicNamePartition, ...],
) -> DescribedAssignment:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    cls = nested(response_cls, DescribedPartitions)
    topics = []
    for name, numbers in sorted(by_topic.items()):
        view = ctx.services.metadata.topic(name)
        topic_id = uuid.UUID(view.info.id) if view is not None else uuid.UUID(int=0)
        topics.append(
            build(
                cls,
                topic_id=topic_id,
                topic_name=name,
                partitions=tuple(i32(p) for p in numbers),
            )
        )
    return build(nested(response_cls, DescribedAssignment), topic_partitions=tuple(topics))


def _described_member(
    ctx: KafkaContext, response_cls: type[ConsumerGroupDescribeResponse], m: MemberDescription
) -> Member:
    return build(
        nested(response_cls, Member),
        member_id=m.member_id,
        instance_id=None,
        rack_id=None,
        member_epoch=i32(m.epoch),
        client_id="",
        client_host="",
        subscribed_topic_names=m.topics,
        subscribed_topic_regex=None,
        assignment=_described_assignment(ctx, response_cls, m.partitions),
        target_assignment=_described_assignment(ctx, response_cls, m.target),
    )


async def _describe(ctx: KafkaContext, group: str) -> GroupDescription:
    return await groups_of(ctx).describe(group)


async def handle_consumer_group_describe(
    ctx: KafkaContext,
    request: ConsumerGroupDescribeRequest,
    response_cls: type[ConsumerGroupDescribeResponse],
) -> ConsumerGroupDescribeResponse:
    """GROUP_ID_NOT_FOUND for a group that does not exist or whose members all speak the
    classic protocol, as Kafka answers (clients then ask DescribeGroups)."""
    described = []
    for name in request.group_ids:
        fields: dict[str, object] = {"group_id": name, "group_state": "Dead", "members": ()}
        fields.update(group_epoch=i32(-1), assignment_epoch=i32(-1), assignor_name="")
        fields.update(error_message=None, authorized_operations=i32(-(2**31)))
        got: GroupDescription | None = None
        if not ctx.allowed("group", name, "describe"):
            fields["error_code"] = KafkaError.group_authorization_failed
            fields["error_message"] = f"{ctx.principal} may not describe group {name!r}"
        else:
            got, fields["error_code"], fields["error_message"] = await attempt(
                functools.partial(_describe, ctx, name)
            )
        if got is not None and (got.consumer_state == "Dead" or got.classic):
            fields["error_code"] = KafkaError.group_id_not_found
            fields["error_message"] = f"group {name!r} is not a consumer (KIP-848) group"
        elif got is not None:
            fields.update(group_state=got.consumer_state, assignor_name=got.protocol)
            fields.update(group_epoch=i32(got.group_epoch), assignment_epoch=i32(got.group_epoch))
            fields["members"] = tuple(_described_member(ctx, response_cls, m) for m in got.members)
        described.append(build(nested(response_cls, DescribedGroup), **fields))
    return build(response_cls, throttle_time=NO_THROTTLE, groups=tuple(described))
