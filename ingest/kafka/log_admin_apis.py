"""DescribeProducers and DescribeLogDirs (ingest/service/log_admin.py reads the broker).
Authorized as Kafka does: READ on a topic to see its producers, DESCRIBE on the cluster to
see the log directories."""

from __future__ import annotations

from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.describe_log_dirs.v4.response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kio.schema.describe_producers.v0.request import DescribeProducersRequest
from kio.schema.describe_producers.v0.response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from kio.schema.errors import ErrorCode as KafkaError
from kio.static.primitive import i32, i64

from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import build, kafka_error, nested
from ingest.service.log_admin import NO_TRANSACTION, ActiveProducer
from logformat.errors import TierlogError
from metadata.acl import CLUSTER_NAME

NO_COORDINATOR_EPOCH = -1  # no transaction coordinator wrote a marker for it


def _producers(
    ctx: KafkaContext, topic: str, partition: int
) -> tuple[tuple[ActiveProducer, ...], KafkaError, str | None]:
    if not ctx.allowed("topic", topic, "read"):
        return (), KafkaError.topic_authorization_failed, f"{ctx.principal} may not read {topic!r}"
    try:
        return ctx.services.logs.active_producers(topic, partition), KafkaError.none, None
    except TierlogError as exc:
        return (), kafka_error(exc), exc.message


async def handle_describe_producers(
    ctx: KafkaContext,
    request: DescribeProducersRequest,
    response_cls: type[DescribeProducersResponse],
) -> DescribeProducersResponse:
    topic_cls = nested(response_cls, TopicResponse)
    part_cls = nested(response_cls, PartitionResponse)
    state_cls = nested(response_cls, ProducerState)
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partition_indexes:
            found, error, message = _producers(ctx, t.name, int(p))
            states = tuple(
                build(
                    state_cls,
                    producer_id=i64(a.producer_id),
                    producer_epoch=i32(a.epoch),
                    last_sequence=i32(a.last_sequence),
                    last_timestamp=i64(a.last_timestamp),
                    coordinator_epoch=i32(NO_COORDINATOR_EPOCH),
                    current_txn_start_offset=i64(NO_TRANSACTION),
                )
                for a in found
            )
            partitions.append(
                build(
                    part_cls,
                    partition_index=p,
                    error_code=error,
                    error_message=message,
                    active_producers=states,
                )
            )
        topics.append(build(topic_cls, name=t.name, partitions=tuple(partitions)))
    return build(response_cls, throttle_time=NO_THROTTLE, topics=tuple(topics))


async def handle_describe_log_dirs(
    ctx: KafkaContext,
    request: DescribeLogDirsRequest,
    response_cls: type[DescribeLogDirsResponse],
) -> DescribeLogDirsResponse:
    if not ctx.allowed("cluster", CLUSTER_NAME, "describe"):
        return build(
            response_cls,
            throttle_time=NO_THROTTLE,
            error_code=KafkaError.cluster_authorization_failed,
            results=(),
        )
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, int(p)) for t in request.topics for p in t.partitions}
    found = ctx.services.logs.log_dir()
    by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
    part_cls = nested(response_cls, DescribeLogDirsPartition)
    for row in found.partitions:
        tp = row.partition
        if wanted is not None and (tp.topic, tp.partition) not in wanted:
            continue
        by_topic.setdefault(tp.topic, []).append(
            build(
                part_cls,
                partition_index=i32(tp.partition),
                partition_size=i64(row.size),
                offset_lag=i64(row.lag),
                is_future_key=False,
            )
        )
    topic_cls = nested(response_cls, DescribeLogDirsTopic)
    result = build(
        nested(response_cls, DescribeLogDirsResult),
        error_code=KafkaError.none,
        log_dir=found.path,
        topics=tuple(build(topic_cls, name=n, partitions=tuple(ps)) for n, ps in by_topic.items()),
        total_bytes=i64(found.total_bytes),
        usable_bytes=i64(found.usable_bytes),
    )
    return build(
        response_cls, throttle_time=NO_THROTTLE, error_code=KafkaError.none, results=(result,)
    )
