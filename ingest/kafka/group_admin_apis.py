"""ListGroups, DescribeGroups, DeleteGroups and OffsetDelete: Kafka's group admin, on the
consumer groups the listener is given (cluster/kafka_groups.py; the rules are
groups/kafka_admin.py's). Authorized as Kafka does: DESCRIBE on a group to list or describe
it (or on the cluster to list every group), DELETE to delete it or its offsets, and READ on
a topic whose offsets are deleted. ListGroups is answered by one broker (_lists_groups), so
tools that add up every broker's answer see each group once.
"""

from __future__ import annotations

import functools

from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_groups.v2.response import DeletableGroupResult, DeleteGroupsResponse
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_groups.v5.response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListedGroup, ListGroupsResponse
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_delete.v0.response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kio.static.primitive import i32

from cluster.kafka_groups import GroupDescription, MemberDescription
from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.consumer_protocol import encode_assignment, encode_subscription
from ingest.kafka.context import KafkaContext
from ingest.kafka.group_apis import CONSUMER, attempt, groups_of
from ingest.kafka.protocol import build, nested
from metadata.acl import CLUSTER_NAME
from metadata.types import TopicNamePartition

CLASSIC = "classic"  # ListGroups v5's group type
# Kafka's AclOperation codes of what a group supports: READ, DELETE, DESCRIBE.
_GROUP_OPERATIONS = {"read": 3, "delete": 6, "describe": 8}
NOT_ASKED = i32(-(2**31))  # authorized operations not asked for (Kafka's INT32_MIN)


def _lists_groups(ctx: KafkaContext) -> bool:
    """Tools ask every broker and add the answers up (each Kafka broker lists the groups it
    coordinates). Every tierlog broker coordinates every group, so one answers for all: the
    live broker of the lowest id (any broker, while none is known to be live)."""
    live = [b for b, reg in ctx.services.metadata.brokers.items() if reg.alive]
    return not live or ctx.services.config.broker_id == min(live)


async def handle_list_groups(
    ctx: KafkaContext, request: ListGroupsRequest, response_cls: type[ListGroupsResponse]
) -> ListGroupsResponse:
    if not _lists_groups(ctx):
        return build(response_cls, throttle_time=NO_THROTTLE, error_code=KafkaError.none, groups=())
    listed, error, _ = await attempt(lambda: groups_of(ctx).list_groups())
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    all_groups = ctx.allowed("cluster", CLUSTER_NAME, "describe")
    cls = nested(response_cls, ListedGroup)
    groups = tuple(
        build(cls, group_id=g.name, protocol_type=CONSUMER, group_state=g.state, group_type=CLASSIC)
        for g in listed or ()
        if (not states or g.state.lower() in states)
        and (not types or CLASSIC in types)
        and (all_groups or ctx.allowed("group", g.name, "describe"))
    )
    return build(response_cls, throttle_time=NO_THROTTLE, error_code=error, groups=groups)


def _operations(ctx: KafkaContext, group: str, asked: bool) -> i32:
    if not asked:
        return NOT_ASKED
    bits = 0
    for operation, code in _GROUP_OPERATIONS.items():
        if ctx.allowed("group", group, operation):
            bits |= 1 << code
    return i32(bits)


def _member(cls: type[DescribedGroupMember], m: MemberDescription) -> DescribedGroupMember:
    metadata = m.metadata if m.metadata is not None else encode_subscription(m.topics)
    assignment = m.assignment if m.assignment is not None else encode_assignment(m.partitions)
    return build(
        cls,
        member_id=m.member_id,
        group_instance_id=None,
        client_id="",
        client_host="",
        member_metadata=metadata,
        member_assignment=assignment,
    )


async def _describe(ctx: KafkaContext, name: str) -> GroupDescription:
    return await groups_of(ctx).describe(name)


async def _delete(ctx: KafkaContext, name: str) -> None:
    await groups_of(ctx).delete(name)


async def handle_describe_groups(
    ctx: KafkaContext, request: DescribeGroupsRequest, response_cls: type[DescribeGroupsResponse]
) -> DescribeGroupsResponse:
    group_cls = nested(response_cls, DescribedGroup)
    member_cls = nested(response_cls, DescribedGroupMember)
    asked = bool(getattr(request, "include_authorized_operations", False))
    described = []
    for name in request.groups:
        fields: dict[str, object] = {"group_id": name, "protocol_type": "", "protocol_data": ""}
        fields.update(group_state="", members=(), authorized_operations=NOT_ASKED)
        if not ctx.allowed("group", name, "describe"):
            fields["error_code"] = KafkaError.group_authorization_failed
        else:
            got, error, _ = await attempt(functools.partial(_describe, ctx, name))
            fields["error_code"] = error
            if isinstance(got, GroupDescription):
                fields.update(group_state=got.state, protocol_data=got.protocol)
                fields.update(protocol_type=CONSUMER if got.members else "")
                fields["members"] = tuple(_member(member_cls, m) for m in got.members)
                fields["authorized_operations"] = _operations(ctx, name, asked)
        described.append(build(group_cls, **fields))
    return build(response_cls, throttle_time=NO_THROTTLE, groups=tuple(described))


async def handle_delete_groups(
    ctx: KafkaContext, request: DeleteGroupsRequest, response_cls: type[DeleteGroupsResponse]
) -> DeleteGroupsResponse:
    cls = nested(response_cls, DeletableGroupResult)
    results = []
    for name in request.groups_names:
        if not ctx.allowed("group", name, "delete"):
            error = KafkaError.group_authorization_failed
        else:
            _, error, _ = await attempt(functools.partial(_delete, ctx, name))
        results.append(build(cls, group_id=name, error_code=error))
    return build(response_cls, throttle_time=NO_THROTTLE, results=tuple(results))


async def handle_offset_delete(
    ctx: KafkaContext, request: OffsetDeleteRequest, response_cls: type[OffsetDeleteResponse]
) -> OffsetDeleteResponse:
    topic_cls = nested(response_cls, OffsetDeleteResponseTopic)
    part_cls = nested(response_cls, OffsetDeleteResponsePartition)
    named = [
        TopicNamePartition(t.name, int(p.partition_index))
        for t in request.topics
        for p in t.partitions
    ]
    errors: dict[TopicNamePartition, KafkaError] = {}
    top = KafkaError.none
    if not ctx.allowed("group", request.group_id, "delete"):
        top = KafkaError.group_authorization_failed
    else:
        allowed = [tp for tp in named if ctx.allowed("topic", tp.topic, "read")]
        errors = dict.fromkeys(named, KafkaError.topic_authorization_failed)
        if allowed:
            answers, top, _ = await attempt(
                lambda: groups_of(ctx).delete_offsets(request.group_id, allowed)
            )
            for tp, name in (answers or {}).items():
                errors[tp] = KafkaError.none if name is None else KafkaError[name.lower()]
    topics = tuple(
        build(
            topic_cls,
            name=t.name,
            partitions=tuple(
                build(
                    part_cls,
                    partition_index=p.partition_index,
                    error_code=errors.get(
                        TopicNamePartition(t.name, int(p.partition_index)), KafkaError.none
                    ),
                )
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    if top is not KafkaError.none:
        topics = ()
    return build(response_cls, error_code=top, throttle_time=NO_THROTTLE, topics=topics)
