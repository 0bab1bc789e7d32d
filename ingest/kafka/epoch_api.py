"""OffsetForLeaderEpoch (API 23): where a leader epoch ended on the partition's leader.

librdkafka asks it after a leader change when its fetch position carries an epoch (the
batches we serve carry theirs, fetch_api.py): a position past where its epoch ended means
records were lost to an unclean leader change, and the consumer resets or reports it.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
)
from kio.schema.offset_for_leader_epoch.v4.response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)

from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.fetch_api import leader
from ingest.kafka.leader_epochs import UNDEFINED, EpochEnd, epoch_end, fence
from ingest.kafka.protocol import build, kafka_error, nested
from logformat.errors import TierlogError


async def _one(
    ctx: KafkaContext, topic: str, p: OffsetForLeaderPartition
) -> tuple[KafkaError, EpochEnd]:
    try:
        state = await leader(ctx, topic, p.partition, "describe")
    except TierlogError as exc:
        return kafka_error(exc), UNDEFINED
    fenced = fence(state, p.current_leader_epoch)
    if fenced is not None:
        return fenced, UNDEFINED
    return KafkaError.none, epoch_end(state, p.leader_epoch)


async def handle_offset_for_leader_epoch(
    ctx: KafkaContext,
    request: OffsetForLeaderEpochRequest,
    response_cls: type[OffsetForLeaderEpochResponse],
) -> OffsetForLeaderEpochResponse:
    topic_cls = nested(response_cls, OffsetForLeaderTopicResult)
    part_cls = nested(response_cls, EpochEndOffset)
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            error, found = await _one(ctx, t.topic, p)
            parts.append(
                build(
                    part_cls,
                    error_code=error,
                    partition=p.partition,
                    leader_epoch=found.epoch,
                    end_offset=found.end_offset,
                )
            )
        topics.append(build(topic_cls, topic=t.topic, partitions=tuple(parts)))
    return build(response_cls, throttle_time=NO_THROTTLE, topics=tuple(topics))
