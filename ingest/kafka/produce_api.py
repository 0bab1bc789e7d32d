"""Produce: each partition's RecordBatch becomes tierlog frames, appended by its leader.

The path after decoding is the HTTP produce path's: frames_for() frames the records (and
carries an idempotent producer's id, epoch and base sequence into the frame header, where
the log's producer state checks them) and the partition group-commits them and waits for
the ISR under acks=all. Once every partition's records are queued (in order), the
connection's next request may start (turns.py) while this one waits. A batch that fails to
decode is answered with its error and writes nothing; each partition succeeds or fails on
its own, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import TYPE_CHECKING, NamedTuple

from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.produce.v9.request import ProduceRequest
from kio.schema.produce.v9.response import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)

from ingest.kafka.client_limits import leader_for_write
from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.offload import offload
from ingest.kafka.protocol import build, kafka_error, nested
from ingest.kafka.record_batch import decode_batch
from ingest.produce import ProducerFields, frames_for
from ingest.service.expansion import expansion_limits
from ingest.service.partitions import log_start
from ingest.service.produce import Queued

# The topic's rules for stored records (keys on compacted topics, header bounds, timestamps,
# LogAppendTime), shared with HTTP produce rather than restated here.
from ingest.service.record_rules import checked_records
from logformat.errors import TierlogError
from metadata.txn_rows import TxnError

if TYPE_CHECKING:
    import pyarrow as pa

    from ingest.broker_config import BrokerConfig
    from metadata.configs import TopicConfig

log = logging.getLogger("tierlog.kafka")


class _Outcome:
    __slots__ = ("base_offset", "error", "log_start", "message", "record_index")

    def __init__(
        self,
        error: KafkaError,
        base_offset: int = -1,
        log_start: int = -1,
        message: str | None = None,
        record_index: int | None = None,
    ) -> None:
        self.error, self.base_offset, self.log_start = error, base_offset, log_start
        self.message, self.record_index = message, record_index

    @classmethod
    def refused(cls, exc: TierlogError) -> _Outcome:
        """A partition's error with tierlog's message, and the record it names (Produce v8+
        carry both: error_message, record_errors)."""
        index = exc.extra.get("record_index", exc.extra.get("index"))
        return cls(
            kafka_error(exc),
            message=exc.message,
            record_index=index if isinstance(index, int) else None,
        )


class _Prepared(NamedTuple):
    frames: list[bytearray]
    batch: pa.RecordBatch
    transaction: tuple[int, int] | None  # a transactional producer's (id, epoch)


def _prepare(data: bytes, config: BrokerConfig, topic: TopicConfig, now_ms: int) -> _Prepared:
    """Decode, check and frame one partition's batch: the heavy part of a produce (bounded
    decompression, the record walk, Arrow encoding and compression), run in a worker thread
    so that no batch holds the event loop (zstd, lz4, numpy and Arrow release the GIL)."""
    kb = decode_batch(data, expansion_limits(config), config.data_limits)
    batch = checked_records(kb.records, topic, now_ms, config.data_limits)
    producer = (
        ProducerFields(kb.producer_id, kb.producer_epoch, kb.base_sequence)
        if kb.producer_id >= 0
        else None
    )
    txn = (kb.producer_id, kb.producer_epoch) if kb.transactional else None
    return _Prepared(frames_for(batch, topic, producer), batch, txn)


async def _queue(
    ctx: KafkaContext, topic: str, partition: int, data: bytes | None, acks: int
) -> Queued:
    produce = ctx.services.produce
    view = await produce.topic(ctx.principal, topic, partition)
    state = leader_for_write(ctx, topic, partition)  # the same backpressure as HTTP produce
    now_ms = int(time.time() * 1000)
    prepared = await offload(_prepare, data or b"", ctx.services.config, view.config, now_ms)
    await produce.check_schema_ids(view, prepared.batch)
    records = prepared.batch.num_rows
    return await produce.queue_checked(
        view, state, prepared.frames, acks, records, prepared.transaction
    )


def _failed(exc: BaseException, topic: str, partition: int) -> _Outcome:
    if isinstance(exc, TxnError):  # KIP-890: not in the producer's transaction, or fenced
        return _Outcome(KafkaError[exc.kafka_name.lower()], message=exc.message)
    if isinstance(exc, TierlogError):
        return _Outcome.refused(exc)
    # one partition's fault must not take the connection down
    log.error("kafka produce failed", exc_info=exc, extra={"topic": topic, "partition": partition})
    return _Outcome(KafkaError.unknown_server_error)


async def _partition(
    ctx: KafkaContext, topic: str, partition: int, data: bytes | None, acks: int
) -> Queued | _Outcome:
    if acks not in (-1, 0, 1):
        return _Outcome(KafkaError.invalid_required_acks)
    try:
        return await _queue(ctx, topic, partition, data, acks)
    except Exception as exc:
        return _failed(exc, topic, partition)


async def _completed(
    ctx: KafkaContext, q: Queued | _Outcome, partition: int, timeout_s: float
) -> _Outcome:
    if isinstance(q, _Outcome):
        return q
    try:
        results = await ctx.services.produce.completed(q, timeout_s)
    except Exception as exc:
        return _failed(exc, q.state.topic, partition)
    return _Outcome(KafkaError.none, results[0].base_offset, log_start(q.state))


async def _produce(ctx: KafkaContext, request: ProduceRequest) -> list[_Outcome]:
    """Every partition's records queued, in request order, before the connection's next
    request may start (turns.py); then the writes (and replicas, acks=all) awaited."""
    timeout_s = ctx.services.produce.timeout_s()
    asked = request.timeout.total_seconds()
    if asked > 0:
        timeout_s = min(timeout_s, asked)
    parts = [(t.name, p) for t in request.topic_data for p in t.partition_data]
    queued = await asyncio.gather(
        *(_partition(ctx, topic, p.index, p.records, request.acks) for topic, p in parts)
    )
    ctx.turns.let_next_start()
    return list(
        await asyncio.gather(
            *(
                _completed(ctx, q, p.index, timeout_s)
                for q, (_, p) in zip(queued, parts, strict=True)
            )
        )
    )


def _record_errors(
    index_cls: type[BatchIndexAndErrorMessage] | None, o: _Outcome
) -> tuple[BatchIndexAndErrorMessage, ...]:
    if index_cls is None or o.record_index is None:
        return ()
    return (build(index_cls, batch_index=o.record_index, batch_index_error_message=o.message),)


async def handle_produce(
    ctx: KafkaContext, request: ProduceRequest, response_cls: type[ProduceResponse]
) -> ProduceResponse | None:
    """The response, or None under acks=0 (Kafka sends none)."""
    outcomes = iter(await _produce(ctx, request))
    if request.acks == 0:
        return None
    part_cls = nested(response_cls, PartitionProduceResponse)
    topic_cls = nested(response_cls, TopicProduceResponse)
    # Produce v8+ names the failing record (record_errors); older versions have no such type.
    module = sys.modules[response_cls.__module__]
    index_cls = getattr(module, BatchIndexAndErrorMessage.__name__, None)
    topics = []
    for t in request.topic_data:
        parts = []
        for p in t.partition_data:
            o = next(outcomes)
            parts.append(
                build(
                    part_cls,
                    index=p.index,
                    error_code=o.error,
                    base_offset=o.base_offset,
                    log_append_time=None,
                    log_start_offset=o.log_start,
                    record_errors=_record_errors(index_cls, o),
                    error_message=o.message,
                )
            )
        topics.append(build(topic_cls, name=t.name, partition_responses=tuple(parts)))
    return build(response_cls, responses=tuple(topics), throttle_time=NO_THROTTLE)
