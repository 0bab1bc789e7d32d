"""Kafka's transaction APIs (KIP-98): InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn, answered from the
transaction coordinator (ingest/service/txn_coordinator.py). Parse, call, encode: the rules
live in the coordinator and in metadata/transactions.py.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as KafkaError

from cluster.kafka_groups import ClassicGroups, CommitEntry
from ingest.kafka.cluster_apis import NO_THROTTLE, handle_init_producer_id
from ingest.kafka.context import KafkaContext
from ingest.kafka.group_apis import groups_of
from ingest.kafka.protocol import build, kafka_error, nested
from ingest.service.txn_coordinator import TxnCoordinator, coordinator
from ingest.service.txn_coordinator import stop_coordinator as stop_txn_coordinator
from logformat.errors import TierlogError
from metadata.transactions import TxnError

if TYPE_CHECKING:
    from ingest.broker import Broker

DEFAULT_TIMEOUT_MS = 60_000
MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms


def txn_error(exc: TxnError | TierlogError) -> KafkaError:
    if isinstance(exc, TxnError):
        return KafkaError[exc.kafka_name.lower()]
    return kafka_error(exc)


async def _attempt(call: Awaitable[Any]) -> KafkaError:
    try:
        await call
    except (TxnError, TierlogError) as exc:
        return txn_error(exc)
    return KafkaError.none


def coordinator_for(ctx: KafkaContext) -> TxnCoordinator:
    return coordinator_for_listener(ctx.broker, ctx.groups)


def coordinator_for_listener(broker: Broker, groups: ClassicGroups | None) -> TxnCoordinator:
    """The broker's coordinator, committing offsets through the listener's groups."""
    coord = coordinator(broker)
    if coord.commit_offsets is None and groups is not None:

        async def commit(
            group: str, member: str, generation: int, entries: list[tuple[str, int, int, Any]]
        ) -> None:
            rows = [CommitEntry(t, p, o, m) for t, p, o, m in entries]
            await groups.commit_transactional(group, rows)

        coord.commit_offsets = commit
    return coord


async def stop_coordinator(broker: Broker) -> None:
    await stop_txn_coordinator(broker)


async def handle_init_producer_id_txn(ctx: KafkaContext, request: Any, response_cls: Any) -> Any:
    """InitProducerId: an idempotent producer's (cluster_apis.py) or a transactional one's."""
    if request.transactional_id is None:
        return await handle_init_producer_id(ctx, request, response_cls)
    return await init_transactional(ctx, request, response_cls)


async def init_transactional(ctx: KafkaContext, request: Any, response_cls: Any) -> Any:
    timeout_ms = int(request.transaction_timeout.total_seconds() * 1000) or DEFAULT_TIMEOUT_MS
    fields: dict[str, Any] = {"throttle_time": NO_THROTTLE, "producer_id": -1}
    fields["producer_epoch"] = -1
    if not 0 < timeout_ms <= MAX_TIMEOUT_MS:
        return build(response_cls, error_code=KafkaError.invalid_transaction_timeout, **fields)
    try:
        got = await coordinator_for(ctx).init(request.transactional_id, timeout_ms)
    except (TxnError, TierlogError) as exc:
        return build(response_cls, error_code=txn_error(exc), **fields)
    fields.update(producer_id=got.producer_id, producer_epoch=got.producer_epoch)
    return build(response_cls, error_code=KafkaError.none, **fields)


def _partition_error(ctx: KafkaContext, topic: str, partition: int) -> KafkaError:
    if not ctx.allowed("topic", topic, "write"):
        return KafkaError.topic_authorization_failed
    view = ctx.broker.cache.topic(topic)
    if view is None or not 0 <= partition < len(view.partitions):
        return KafkaError.unknown_topic_or_partition
    return KafkaError.none


async def handle_add_partitions_to_txn(ctx: KafkaContext, request: Any, response_cls: Any) -> Any:
    topics = request.v3_and_below_topics
    errors = {(t.name, p): _partition_error(ctx, t.name, p) for t in topics for p in t.partitions}
    if any(e is not KafkaError.none for e in errors.values()):  # none is added (Kafka)
        errors = {
            k: e if e is not KafkaError.none else KafkaError.operation_not_attempted
            for k, e in errors.items()
        }
    else:
        error = await _attempt(
            coordinator_for(ctx).add_partitions(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                list(errors),
            )
        )
        errors = dict.fromkeys(errors, error)
    part_cls = nested(response_cls, "AddPartitionsToTxnPartitionResult")
    topic_cls = nested(response_cls, "AddPartitionsToTxnTopicResult")
    results = tuple(
        build(
            topic_cls,
            name=t.name,
            results_by_partition=tuple(
                build(part_cls, partition_index=p, partition_error_code=errors[(t.name, p)])
                for p in t.partitions
            ),
        )
        for t in topics
    )
    return build(
        response_cls,
        throttle_time=NO_THROTTLE,
        error_code=KafkaError.none,
        results_by_topic_v3_and_below=results,
        results_by_transaction=(),
    )


async def handle_add_offsets_to_txn(ctx: KafkaContext, request: Any, response_cls: Any) -> Any:
    if not ctx.allowed("group", request.group_id, "read"):
        error = KafkaError.group_authorization_failed
    else:
        error = await _attempt(
            coordinator_for(ctx).add_offsets(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                request.group_id,
            )
        )
    return build(response_cls, throttle_time=NO_THROTTLE, error_code=error)


async def handle_txn_offset_commit(ctx: KafkaContext, request: Any, response_cls: Any) -> Any:
    entries = [
        (t.name, p.partition_index, p.committed_offset, p.committed_metadata)
        for t in request.topics
        for p in t.partitions
    ]
    if not ctx.allowed("group", request.group_id, "read"):
        error = KafkaError.group_authorization_failed
    elif any(not ctx.allowed("topic", t, "read") for t, *_ in entries):
        error = KafkaError.topic_authorization_failed
    elif any(o < 0 for _, _, o, _ in entries):
        error = KafkaError.invalid_request
    else:
        try:
            groups_of(ctx)
            member = (
                getattr(request, "member_id", ""),
                getattr(request, "generation_id", -1),
            )
            error = await _attempt(
                coordinator_for(ctx).txn_offsets(
                    request.transactional_id,
                    request.producer_id,
                    request.producer_epoch,
                    request.group_id,
                    member,
                    entries,
                )
            )
        except TierlogError as exc:
            error = txn_error(exc)
    part_cls = nested(response_cls, "TxnOffsetCommitResponsePartition")
    topic_cls = nested(response_cls, "TxnOffsetCommitResponseTopic")
    topics = tuple(
        build(
            topic_cls,
            name=t.name,
            partitions=tuple(
                build(part_cls, partition_index=p.partition_index, error_code=error)
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return build(response_cls, throttle_time=NO_THROTTLE, topics=topics)


async def handle_end_txn(ctx: KafkaContext, request: Any, response_cls: Any) -> Any:
    error = await _attempt(
        coordinator_for(ctx).end(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
        )
    )
    return build(response_cls, throttle_time=NO_THROTTLE, error_code=error)
