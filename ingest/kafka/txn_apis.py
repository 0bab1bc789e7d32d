"""Kafka's transaction APIs (KIP-98): InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn, answered from the
transaction coordinator (ingest/service/txn_coordinator.py). Parse, call, encode: the rules
live in the coordinator and in metadata/transactions.py.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_offsets_to_txn.v3.response import AddOffsetsToTxnResponse
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.end_txn.v3.response import EndTxnResponse
from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest
from kio.schema.txn_offset_commit.v3.response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

from cluster.kafka_groups import ClassicGroups, CommitEntry
from ingest.kafka.cluster_apis import NO_THROTTLE, handle_init_producer_id
from ingest.kafka.context import KafkaContext
from ingest.kafka.group_apis import groups_of
from ingest.kafka.protocol import build, kafka_error, nested
from logformat.errors import TierlogError
from metadata.txn_rows import TxnError

OffsetEntry = tuple[str, int, int, str | None]  # topic, partition, offset, metadata

if TYPE_CHECKING:
    from ingest.service.services import Services
    from ingest.service.txn_coordinator import TxnCoordinator

DEFAULT_TIMEOUT_MS = 60_000
MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms


def txn_error(exc: TxnError | TierlogError) -> KafkaError:
    if isinstance(exc, TxnError):
        return KafkaError[exc.kafka_name.lower()]
    return kafka_error(exc)


async def _attempt(call: Awaitable[object]) -> KafkaError:
    try:
        await call
    except (TxnError, TierlogError) as exc:
        return txn_error(exc)
    return KafkaError.none


def coordinator_for(ctx: KafkaContext) -> TxnCoordinator:
    return coordinator_for_listener(ctx.services, ctx.groups)


def coordinator_for_listener(services: Services, groups: ClassicGroups | None) -> TxnCoordinator:
    """The broker's coordinator, committing offsets through the listener's groups."""
    coord = services.transactions.coordinator()
    if coord.commit_offsets is None and groups is not None:

        async def commit(
            group: str,
            member: str,
            generation: int,
            entries: list[tuple[str, int, int, str | None]],
        ) -> None:
            rows = [CommitEntry(t, p, o, m) for t, p, o, m in entries]
            await groups.commit_transactional(group, rows)

        coord.commit_offsets = commit
    return coord


async def handle_init_producer_id_txn(
    ctx: KafkaContext, request: InitProducerIdRequest, response_cls: type[InitProducerIdResponse]
) -> InitProducerIdResponse:
    """InitProducerId: an idempotent producer's (cluster_apis.py) or a transactional one's."""
    if request.transactional_id is None:
        return await handle_init_producer_id(ctx, request, response_cls)
    return await init_transactional(ctx, request.transactional_id, request, response_cls)


async def init_transactional(
    ctx: KafkaContext,
    tid: str,
    request: InitProducerIdRequest,
    response_cls: type[InitProducerIdResponse],
) -> InitProducerIdResponse:
    timeout_ms = int(request.transaction_timeout.total_seconds() * 1000) or DEFAULT_TIMEOUT_MS
    fields: dict[str, object] = {"throttle_time": NO_THROTTLE, "producer_id": -1}
    fields["producer_epoch"] = -1
    if not 0 < timeout_ms <= MAX_TIMEOUT_MS:
        return build(response_cls, error_code=KafkaError.invalid_transaction_timeout, **fields)
    try:
        got = await coordinator_for(ctx).init(tid, timeout_ms)
    except (TxnError, TierlogError) as exc:
        return build(response_cls, error_code=txn_error(exc), **fields)
    fields.update(producer_id=got.producer_id, producer_epoch=got.producer_epoch)
    return build(response_cls, error_code=KafkaError.none, **fields)


def _partition_error(ctx: KafkaContext, topic: str, partition: int) -> KafkaError:
    if not ctx.allowed("topic", topic, "write"):
        return KafkaError.topic_authorization_failed
    view = ctx.services.metadata.topic(topic)
    if view is None or not 0 <= partition < len(view.partitions):
        return KafkaError.unknown_topic_or_partition
    return KafkaError.none


async def handle_add_partitions_to_txn(
    ctx: KafkaContext,
    request: AddPartitionsToTxnRequest,
    response_cls: type[AddPartitionsToTxnResponse],
) -> AddPartitionsToTxnResponse:
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
    part_cls = nested(response_cls, AddPartitionsToTxnPartitionResult)
    topic_cls = nested(response_cls, AddPartitionsToTxnTopicResult)
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


async def handle_add_offsets_to_txn(
    ctx: KafkaContext, request: AddOffsetsToTxnRequest, response_cls: type[AddOffsetsToTxnResponse]
) -> AddOffsetsToTxnResponse:
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


async def handle_txn_offset_commit(
    ctx: KafkaContext, request: TxnOffsetCommitRequest, response_cls: type[TxnOffsetCommitResponse]
) -> TxnOffsetCommitResponse:
    entries: list[OffsetEntry] = [
        (str(t.name), int(p.partition_index), int(p.committed_offset), p.committed_metadata)
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
    part_cls = nested(response_cls, TxnOffsetCommitResponsePartition)
    topic_cls = nested(response_cls, TxnOffsetCommitResponseTopic)
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


async def handle_end_txn(
    ctx: KafkaContext, request: EndTxnRequest, response_cls: type[EndTxnResponse]
) -> EndTxnResponse:
    error = await _attempt(
        coordinator_for(ctx).end(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
        )
    )
    return build(response_cls, throttle_time=NO_THROTTLE, error_code=error)
