"""CreateTopics, DeleteTopics and CreatePartitions over the same topic repository as HTTP's
/topics.

Any broker can serve them (Postgres is the controller's store); admin clients send them to
the controller Metadata names (the lease holder). Each topic succeeds or fails on its own,
with Kafka's error and tierlog's message.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from kio.schema.errors import ErrorCode as KafkaError

from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import build, kafka_error, nested
from logformat.errors import ErrorCode, TierlogError
from metadata.acl import CLUSTER_NAME
from metadata.configs import check_min_insync, validate_configs, validate_topic_name
from metadata.topics import MAX_PARTITIONS

log = logging.getLogger("tierlog.kafka")


async def after_topic_change(ctx: KafkaContext) -> None:
    """Reload metadata and reconcile replicas at once, as HTTP topic changes do."""
    await asyncio.to_thread(ctx.broker.cache.refresh, True)
    ctx.broker.reconcile()


def _settings(ctx: KafkaContext, topic: Any) -> tuple[int, int, dict[str, str]]:
    cfg = ctx.broker.config
    partitions = cfg.default_partitions if topic.num_partitions == -1 else topic.num_partitions
    rf = (
        cfg.default_replication_factor
        if topic.replication_factor == -1
        else topic.replication_factor
    )
    if topic.assignments:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, "manual replica assignments are not supported"
        )
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    return partitions, rf, configs


async def _create(ctx: KafkaContext, topic: Any, validate_only: bool) -> tuple[int, int, str]:
    """(partitions, replication factor, topic id) of the created topic."""
    if not ctx.allowed("cluster", CLUSTER_NAME, "create"):  # Kafka: CREATE on either
        ctx.require("topic", topic.name, "create")
    partitions, rf, configs = _settings(ctx, topic)
    if validate_only:  # the checks that need no write: name, configs, existence
        validate_topic_name(topic.name)
        check_min_insync(validate_configs(configs), rf)
        if await asyncio.to_thread(ctx.broker.cache.topic_or_refresh, topic.name) is not None:
            raise TierlogError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists"
            )
        return partitions, rf, str(uuid.UUID(int=0))
    info = await asyncio.to_thread(ctx.broker.topics.create, topic.name, partitions, rf, configs)
    return partitions, rf, info.id


async def handle_create_topics(ctx: KafkaContext, request: Any, response_cls: Any) -> Any:
    result_cls = nested(response_cls, "CreatableTopicResult")
    results = []
    created = False
    for done, topic in enumerate(request.topics):
        if ctx.client_gone():  # Kafka drops a closed connection's work: so do we
            log.info(
                "CreateTopics stopped: the client went away",
                extra={"topics_created": done, "topics_asked": len(request.topics)},
            )
            break
        fields: dict[str, Any] = {"name": topic.name, "configs": (), "topic_config_error_code": 0}
        try:
            partitions, rf, tid = await _create(ctx, topic, request.validate_only)
        except TierlogError as exc:
            fields.update(error_code=kafka_error(exc), error_message=exc.message)
            fields.update(num_partitions=-1, replication_factor=-1, topic_id=uuid.UUID(int=0))
        else:
            created = created or not request.validate_only
            fields.update(error_code=KafkaError.none, error_message=None)
            fields.update(num_partitions=partitions, replication_factor=rf, topic_id=uuid.UUID(tid))
        results.append(build(result_cls, **fields))
    if created:
        await after_topic_change(ctx)
    return build(response_cls, throttle_time=NO_THROTTLE, topics=tuple(results))


async def _delete(ctx: KafkaContext, name: str) -> None:
    ctx.require("topic", name, "delete")
    await ctx.broker.cache.require_topic(name)
    await asyncio.to_thread(ctx.broker.topics.delete, name)


async def handle_delete_topics(ctx: KafkaContext, request: Any, response_cls: Any) -> Any:
    result_cls = nested(response_cls, "DeletableTopicResult")
    results = []
    deleted = False
    for name in request.topic_names:
        try:
            await _delete(ctx, name)
        except TierlogError as exc:
            results.append(
                build(result_cls, name=name, error_code=kafka_error(exc), error_message=exc.message)
            )
        else:
            deleted = True
            results.append(build(result_cls, name=name, error_code=KafkaError.none))
    if deleted:
        await after_topic_change(ctx)
    return build(response_cls, throttle_time=NO_THROTTLE, responses=tuple(results))


async def _grow(ctx: KafkaContext, topic: Any, validate_only: bool) -> None:
    """The HTTP grow's rules (ALTER on the topic, grow only, no manual assignment)."""
    ctx.require("topic", topic.name, "alter")
    view = await ctx.broker.cache.require_topic(topic.name)
    if topic.assignments is not None:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, "manual replica assignments are not supported"
        )
    if not validate_only:
        await asyncio.to_thread(ctx.broker.topics.add_partitions, topic.name, topic.count)
    elif not view.info.partition_count < topic.count <= MAX_PARTITIONS:
        raise TierlogError(
            ErrorCode.INVALID_PARTITIONS,
            f"topic {topic.name!r} has {view.info.partition_count} partitions; the new total "
            f"must be larger and at most {MAX_PARTITIONS}, got {topic.count}",
        )


async def handle_create_partitions(ctx: KafkaContext, request: Any, response_cls: Any) -> Any:
    result_cls = nested(response_cls, "CreatePartitionsTopicResult")
    names = [t.name for t in request.topics]
    results = []
    grown = False
    for topic in request.topics:
        try:
            if names.count(topic.name) > 1:  # Kafka refuses every copy of a duplicate
                raise TierlogError(
                    ErrorCode.INVALID_REQUEST, f"topic {topic.name!r} is named more than once"
                )
            await _grow(ctx, topic, request.validate_only)
        except TierlogError as exc:
            error, message = kafka_error(exc), exc.message
        else:
            grown = grown or not request.validate_only
            error, message = KafkaError.none, ""
        results.append(
            build(result_cls, name=topic.name, error_code=error, error_message=message or None)
        )
    if grown:
        await after_topic_change(ctx)
    return build(response_cls, throttle_time=NO_THROTTLE, results=tuple(results))
