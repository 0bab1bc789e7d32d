"""CreateTopics, DeleteTopics and CreatePartitions over the same topic repository as HTTP's
/topics.

Every broker can serve them (Postgres is the controller's store); admin clients send them to
the controller Metadata names (the lease holder). Each topic succeeds or fails on its own,
with Kafka's error and tierlog's message.
"""

from __future__ import annotations

import logging
import uuid

from kio.schema.create_partitions.v3.request import CreatePartitionsRequest
from kio.schema.create_partitions.v3.response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.create_topics.v7.response import CreatableTopicResult, CreateTopicsResponse
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest
from kio.schema.delete_topics.v5.response import DeletableTopicResult, DeleteTopicsResponse
from kio.schema.errors import ErrorCode as KafkaError

from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import build, kafka_error, nested
from ingest.service.topic_admin import NewTopic
from logformat.errors import ErrorCode, TierlogError

log = logging.getLogger("tierlog.kafka")


def _new_topic(topic: CreatableTopic) -> NewTopic:
    """A CreateTopics entry as the topic admin takes it (-1: the broker's default)."""
    return NewTopic(
        topic.name,
        None if topic.num_partitions == -1 else topic.num_partitions,
        None if topic.replication_factor == -1 else topic.replication_factor,
        {c.name: c.value for c in topic.configs if c.value is not None},
        manual_assignment=bool(topic.assignments),
    )


async def handle_create_topics(
    ctx: KafkaContext, request: CreateTopicsRequest, response_cls: type[CreateTopicsResponse]
) -> CreateTopicsResponse:
    result_cls = nested(response_cls, CreatableTopicResult)
    results = []
    async with ctx.services.admin.batch() as admin:  # one refresh for the whole request
        for done, topic in enumerate(request.topics):
            if ctx.client_gone():  # Kafka drops a closed connection's work: so do we
                log.info(
                    "CreateTopics stopped: the client went away",
                    extra={"topics_created": done, "topics_asked": len(request.topics)},
                )
                break
            fields: dict[str, object] = {
                "name": topic.name,
                "configs": (),
                "topic_config_error_code": 0,
            }
            try:
                new = _new_topic(topic)
                partitions, rf, tid = await admin.create(ctx.principal, new, request.validate_only)
            except TierlogError as exc:
                fields.update(error_code=kafka_error(exc), error_message=exc.message)
                fields.update(num_partitions=-1, replication_factor=-1, topic_id=uuid.UUID(int=0))
            else:
                fields.update(error_code=KafkaError.none, error_message=None)
                fields.update(
                    num_partitions=partitions, replication_factor=rf, topic_id=uuid.UUID(tid)
                )
            results.append(build(result_cls, **fields))
    return build(response_cls, throttle_time=NO_THROTTLE, topics=tuple(results))


async def handle_delete_topics(
    ctx: KafkaContext, request: DeleteTopicsRequest, response_cls: type[DeleteTopicsResponse]
) -> DeleteTopicsResponse:
    result_cls = nested(response_cls, DeletableTopicResult)
    results = []
    async with ctx.services.admin.batch() as admin:
        for name in request.topic_names:
            try:
                await admin.delete(ctx.principal, name)
            except TierlogError as exc:
                error, message = kafka_error(exc), exc.message
                results.append(
                    build(result_cls, name=name, error_code=error, error_message=message)
                )
            else:
                results.append(build(result_cls, name=name, error_code=KafkaError.none))
    return build(response_cls, throttle_time=NO_THROTTLE, responses=tuple(results))


async def handle_create_partitions(
    ctx: KafkaContext,
    request: CreatePartitionsRequest,
    response_cls: type[CreatePartitionsResponse],
) -> CreatePartitionsResponse:
    result_cls = nested(response_cls, CreatePartitionsTopicResult)
    names = [t.name for t in request.topics]
    results = []
    async with ctx.services.admin.batch() as admin:
        for topic in request.topics:
            try:
                if names.count(topic.name) > 1:  # Kafka refuses every copy of a duplicate
                    raise TierlogError(
                        ErrorCode.INVALID_REQUEST, f"topic {topic.name!r} is named more than once"
                    )
                manual = topic.assignments is not None
                await admin.grow(
                    ctx.principal, topic.name, topic.count, manual, request.validate_only
                )
            except TierlogError as exc:
                error, message = kafka_error(exc), exc.message
            else:
                error, message = KafkaError.none, ""
            results.append(
                build(result_cls, name=topic.name, error_code=error, error_message=message or None)
            )
    return build(response_cls, throttle_time=NO_THROTTLE, results=tuple(results))
