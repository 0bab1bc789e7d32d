"""OffsetCommit and OffsetFetch: a group's committed offsets, the same rows HTTP groups
commit and `tierlog groups describe` shows (through cluster/kafka_groups.py).

Per partition, as Kafka answers: a topic the caller may not read (commit) or describe
(fetch) gets TOPIC_AUTHORIZATION_FAILED and the others go ahead; a group-level failure
(unknown member, old generation) is every partition's error.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.offset_commit.v8.request import OffsetCommitRequest, OffsetCommitRequestPartition
from kio.schema.offset_commit.v8.response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest
from kio.schema.offset_fetch.v7.response import (
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)

from cluster.kafka_groups import CommitEntry
from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.group_apis import attempt, groups_of
from ingest.kafka.protocol import build, nested

NO_OFFSET = -1
NO_EPOCH = -1
MAX_METADATA = 4096  # Kafka's offset.metadata.max.bytes


def _precheck(ctx: KafkaContext, topic: str, p: OffsetCommitRequestPartition) -> KafkaError:
    if not ctx.allowed("topic", topic, "read"):
        return KafkaError.topic_authorization_failed
    metadata = p.committed_metadata
    if metadata is not None and (len(metadata.encode()) > MAX_METADATA or "\x00" in metadata):
        return KafkaError.offset_metadata_too_large
    if p.committed_offset < 0:
        return KafkaError.invalid_request
    return KafkaError.none


async def handle_offset_commit(
    ctx: KafkaContext, request: OffsetCommitRequest, response_cls: type[OffsetCommitResponse]
) -> OffsetCommitResponse:
    group = request.group_id
    errors: dict[tuple[str, int], KafkaError] = {}
    entries: list[CommitEntry] = []
    for t in request.topics:
        for p in t.partitions:
            errors[(t.name, p.partition_index)] = error = _precheck(ctx, t.name, p)
            if error is KafkaError.none:
                entries.append(
                    CommitEntry(t.name, p.partition_index, p.committed_offset, p.committed_metadata)
                )

    async def commit() -> None:
        ctx.require("group", group, "read")
        generation = request.generation_id_or_member_epoch
        await groups_of(ctx).commit(group, request.member_id, generation, entries)

    if entries:
        _, error, _ = await attempt(commit)
        for e in entries:
            errors[(e.topic, e.partition)] = error
    topic_cls = nested(response_cls, OffsetCommitResponseTopic)
    part_cls = nested(response_cls, OffsetCommitResponsePartition)
    topics = tuple(
        build(
            topic_cls,
            name=t.name,
            partitions=tuple(
                build(
                    part_cls,
                    partition_index=p.partition_index,
                    error_code=errors[(t.name, p.partition_index)],
                )
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return build(response_cls, throttle_time=NO_THROTTLE, topics=topics)


async def handle_offset_fetch(
    ctx: KafkaContext, request: OffsetFetchRequest, response_cls: type[OffsetFetchResponse]
) -> OffsetFetchResponse:
    group = request.group_id

    async def committed() -> tuple[CommitEntry, ...]:
        ctx.require("group", group, "describe")
        return await groups_of(ctx).committed(group)

    rows, error, _ = await attempt(committed)
    known = {(r.topic, r.partition): r for r in rows or ()}
    if request.topics is None:  # v2+: every partition the group committed
        wanted: dict[str, list[int]] = {}
        for topic, index in sorted(known):
            if ctx.allowed("topic", topic, "describe"):
                wanted.setdefault(topic, []).append(index)
    else:
        wanted = {t.name: list(t.partition_indexes) for t in request.topics}
    topic_cls = nested(response_cls, OffsetFetchResponseTopic)
    part_cls = nested(response_cls, OffsetFetchResponsePartition)

    def partition(topic: str, index: int) -> OffsetFetchResponsePartition:
        row = known.get((topic, index))
        # The group's error is the body's from v2 on, each partition's before.
        code = error if response_cls.__version__ < 2 else KafkaError.none
        if not ctx.allowed("topic", topic, "describe"):
            code, row = KafkaError.topic_authorization_failed, None
        return build(
            part_cls,
            partition_index=index,
            committed_offset=row.offset if row is not None else NO_OFFSET,
            committed_leader_epoch=NO_EPOCH,
            metadata=(row.metadata or "") if row is not None else "",
            error_code=code,
        )

    topics = tuple(
        build(topic_cls, name=name, partitions=tuple(partition(name, i) for i in indexes))
        for name, indexes in wanted.items()
    )
    return build(response_cls, throttle_time=NO_THROTTLE, topics=topics, error_code=error)
