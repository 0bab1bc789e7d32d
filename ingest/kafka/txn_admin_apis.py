"""ListTransactions and DescribeTransactions over the transaction store the listener is given
(cluster/kafka_transactions.py). tierlog's ACLs have no TransactionalId resource, so both
need DESCRIBE on the cluster (Kafka asks DESCRIBE on each transactional id)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import (
    DescribeTransactionsResponse,
    TopicData,
)
from kio.schema.describe_transactions.v0.response import (
    TransactionState as DescribedState,
)
from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.list_transactions.v1.response import ListTransactionsResponse
from kio.schema.list_transactions.v1.response import TransactionState as ListedState
from kio.static.primitive import i16, i64

from cluster.kafka_transactions import TransactionRow
from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import build, nested
from metadata.acl import CLUSTER_NAME

STATES = frozenset(
    {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}
)
NOT_STARTED = datetime.fromtimestamp(-0.001, UTC)  # Kafka's -1 ms: no transaction under way


async def _rows(ctx: KafkaContext) -> list[TransactionRow]:
    store = ctx.transactions
    return [] if store is None else list(await asyncio.to_thread(store.list))


def _lists_transactions(ctx: KafkaContext) -> bool:
    """Whether this broker answers ListTransactions with the store's rows. Admin clients
    ask every broker and join the answers (in Kafka each lists the ids it coordinates);
    every tierlog broker reads the same store, so only the lowest live broker id Metadata
    names answers them, the others none: each transaction is listed once."""
    me = ctx.services.config.broker_id
    live = [
        broker_id
        for broker_id, reg in ctx.services.metadata.brokers.items()
        if reg.alive and ctx.kafka_address(broker_id) is not None
    ]
    return not live or me == min(live)


def _listed(request: ListTransactionsRequest, row: TransactionRow, now: datetime) -> bool:
    states, pids = set(request.state_filters), {int(p) for p in request.producer_id_filters}
    duration_ms = int(getattr(request, "duration_filter", -1))
    if states and row.state not in states:
        return False
    if pids and row.producer_id not in pids:
        return False
    if duration_ms >= 0:  # v1: transactions running longer than this
        started = row.started_at
        return started is not None and now - started > timedelta(milliseconds=duration_ms)
    return True


async def handle_list_transactions(
    ctx: KafkaContext,
    request: ListTransactionsRequest,
    response_cls: type[ListTransactionsResponse],
) -> ListTransactionsResponse:
    if not ctx.allowed("cluster", CLUSTER_NAME, "describe"):
        return build(
            response_cls,
            throttle_time=NO_THROTTLE,
            error_code=KafkaError.cluster_authorization_failed,
            unknown_state_filters=(),
            transaction_states=(),
        )
    now = datetime.now(UTC)
    cls = nested(response_cls, ListedState)
    listed = tuple(
        build(
            cls,
            transactional_id=r.transactional_id,
            producer_id=i64(r.producer_id),
            transaction_state=r.state,
        )
        for r in (await _rows(ctx) if _lists_transactions(ctx) else [])
        if _listed(request, r, now)
    )
    return build(
        response_cls,
        throttle_time=NO_THROTTLE,
        error_code=KafkaError.none,
        unknown_state_filters=tuple(s for s in request.state_filters if s not in STATES),
        transaction_states=listed,
    )


def _described(
    response_cls: type[DescribeTransactionsResponse],
    tid: str,
    row: TransactionRow | None,
    error: KafkaError,
) -> DescribedState:
    cls = nested(response_cls, DescribedState)
    if row is None:
        return build(
            cls,
            error_code=error,
            transactional_id=tid,
            transaction_state="",
            transaction_timeout=timedelta(0),
            transaction_start_time=NOT_STARTED,
            producer_id=i64(-1),
            producer_epoch=i16(-1),
            topics=(),
        )
    by_topic: dict[str, list[int]] = {}
    for topic, partition in row.partitions:
        by_topic.setdefault(topic, []).append(partition)
    topic_cls = nested(response_cls, TopicData)
    return build(
        cls,
        error_code=KafkaError.none,
        transactional_id=tid,
        transaction_state=row.state,
        transaction_timeout=timedelta(milliseconds=row.timeout_ms),
        transaction_start_time=row.started_at or NOT_STARTED,
        producer_id=i64(row.producer_id),
        producer_epoch=i16(row.producer_epoch),
        topics=tuple(
            build(topic_cls, topic=t, partitions=tuple(sorted(ps)))
            for t, ps in sorted(by_topic.items())
        ),
    )


async def handle_describe_transactions(
    ctx: KafkaContext,
    request: DescribeTransactionsRequest,
    response_cls: type[DescribeTransactionsResponse],
) -> DescribeTransactionsResponse:
    allowed = ctx.allowed("cluster", CLUSTER_NAME, "describe")
    store = ctx.transactions
    states = []
    for tid in request.transactional_ids:
        if not allowed:
            error, row = KafkaError.transactional_id_authorization_failed, None
        else:
            row = None if store is None else await asyncio.to_thread(store.get, tid)
            error = KafkaError.transactional_id_not_found if row is None else KafkaError.none
        states.append(_described(response_cls, tid, row, error))
    return build(response_cls, throttle_time=NO_THROTTLE, transaction_states=tuple(states))
