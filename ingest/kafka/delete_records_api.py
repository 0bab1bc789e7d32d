"""DeleteRecords (API key 21): each partition's log start moved on its leader by the
record-deletion service (ingest/service/record_deletion.py). DELETE on the topic, as Kafka's
ACL; each partition succeeds or fails on its own, its low watermark -1 on an error."""

from __future__ import annotations

from kio.schema.delete_records.v2.request import DeleteRecordsRequest
from kio.schema.delete_records.v2.response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kio.schema.errors import ErrorCode as KafkaError
from kio.static.primitive import i64

from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import build, kafka_error, nested
from logformat.errors import TierlogError

INVALID_LOW_WATERMARK = -1  # Kafka's DeleteRecordsResponse.INVALID_LOW_WATERMARK


async def _delete(
    ctx: KafkaContext, topic: str, partition: int, offset: int
) -> tuple[int, KafkaError]:
    try:
        low = await ctx.services.deletion.delete_before(topic, partition, offset)
    except TierlogError as exc:
        return INVALID_LOW_WATERMARK, kafka_error(exc)
    return low, KafkaError.none


async def handle_delete_records(
    ctx: KafkaContext,
    request: DeleteRecordsRequest,
    response_cls: type[DeleteRecordsResponse],
) -> DeleteRecordsResponse:
    topic_cls = nested(response_cls, DeleteRecordsTopicResult)
    part_cls = nested(response_cls, DeleteRecordsPartitionResult)
    topics = []
    for t in request.topics:
        allowed = ctx.allowed("topic", t.name, "delete")
        results = []
        for p in t.partitions:
            if allowed:
                low, error = await _delete(ctx, t.name, int(p.partition_index), int(p.offset))
            else:
                low, error = INVALID_LOW_WATERMARK, KafkaError.topic_authorization_failed
            results.append(
                build(
                    part_cls,
                    partition_index=p.partition_index,
                    low_watermark=i64(low),
                    error_code=error,
                )
            )
        topics.append(build(topic_cls, name=t.name, partitions=tuple(results)))
    return build(response_cls, throttle_time=NO_THROTTLE, topics=tuple(topics))
