"""Produce for both front-ends (HTTP's POST /topics/{t}/records, Kafka's Produce): the
write authorization, the leader that takes the records, tiering backpressure, broker-side
schema validation, the append in two halves (queued in order, then completed) and the
produce metrics, each once. The front-ends decode their wire format into frames
(ingest/produce.py, ingest/kafka/record_batch.py) and encode the outcome."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, NamedTuple

from ingest import metrics
from ingest.service.txn_log import txn_log
from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicNamePartition

if TYPE_CHECKING:
    import pyarrow as pa

    from cluster.metadata_cache import TopicView
    from ingest.broker import Broker
    from ingest.produce import ProducePlan
    from ingest.replication.group_commit import AppendResult
    from ingest.replication.partition import Partition
    from logformat.partitioner import StickyPartitioner


class Queued(NamedTuple):
    """A partition's records, queued for its log in submission order."""

    state: Partition
    queued: asyncio.Future[list[AppendResult]]
    acks: int
    min_insync: int
    records: int
    size: int


class Produce:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def topic(self, principal: str, topic: str, partition: int | None = None) -> TopicView:
        """The topic (and partition) `principal` may write to. The client is authorized at
        the first hop; the leader trusts the cluster credential forwarded frames carry."""
        self._broker.authorizer.require(principal, "topic", topic, "write")
        return await self._broker.cache.require_topic(topic, partition)

    def leader(self, topic: str, partition: int) -> Partition:
        """The partition this broker leads and may append a client's records to now: not
        while tiering is behind (ingest/tiered/untiered_bound.py raises LimitError)."""
        # write=True: a leader whose lease is in doubt refuses with its own retriable code,
        # never NOT_LEADER_OR_FOLLOWER in its own epoch (librdkafka would park the partition).
        state = self._broker.require_leader(topic, partition, write=True)
        try:
            self._broker.untiered_bound.check(state)  # client produce only: followers fetch
        except TierlogError as exc:  # a sequence gap after it is this leader's doing
            raise state.refusals.note(exc) from None
        return state

    async def check_schema_ids(self, view: TopicView, batch: pa.RecordBatch) -> None:
        await self._broker.schema_ids.check_batch(view.info.name, view.config, batch)

    async def check_plan_schema_ids(self, view: TopicView, plan: ProducePlan) -> None:
        await self._broker.schema_ids.check_plan(view.info.name, view.config, plan)

    def queue(
        self, view: TopicView, state: Partition, frames: list[bytearray], acks: int, records: int
    ) -> Queued:
        """The first half of an append, synchronous: the frames queued for the partition's
        next group commit, so a connection's pipelined requests keep their order."""
        min_insync = view.config.min_insync_replicas
        queued = state.submit(frames, acks, min_insync)
        return Queued(state, queued, acks, min_insync, records, sum(map(len, frames)))

    async def queue_checked(
        self,
        view: TopicView,
        state: Partition,
        frames: list[bytearray],
        acks: int,
        records: int,
        txn: tuple[int, int] | None,
    ) -> Queued:
        """queue() for ordinary records; a transactional producer's (id, epoch) records are
        first checked against its transaction (KIP-890: the partition was added to it) and
        queued with their span recorded (ingest/service/txn_log.py). TxnError when refused."""
        if txn is None:
            return self.queue(view, state, frames, acks, records)
        min_insync = view.config.min_insync_replicas
        queued = await txn_log(self._broker).submit(
            state, txn[0], txn[1], lambda: state.submit(frames, acks, min_insync)
        )
        return Queued(state, queued, acks, min_insync, records, sum(map(len, frames)))

    async def completed(self, q: Queued, timeout_s: float) -> list[AppendResult]:
        """The second half: the offsets once written (acks=all: once committed)."""
        results = await q.state.completed(q.queued, q.acks, q.min_insync, timeout_s)
        self._produced(q.state.topic, q.records, q.size)
        return results

    async def append(
        self,
        view: TopicView,
        partition: int,
        frames: list[bytearray],
        acks: int,
        records: int,
        forwarded: bool,
    ) -> list[AppendResult]:
        """Appended here when this broker leads the partition, else forwarded to its leader
        (one hop: a request that was forwarded already is refused, its sender retries)."""
        topic, timeout_s = view.info.name, self.timeout_s()
        if forwarded:
            await self.catch_up(topic, partition)
        if self._broker.leader_state(topic, partition) is not None:
            return await self.completed(
                self.queue(view, self.leader(topic, partition), frames, acks, records), timeout_s
            )
        if forwarded:
            raise TierlogError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self._broker.config.broker_id} does not lead {topic}-{partition}",
            )
        url = self._broker.cache.leader_url(view, partition)
        results = await self._broker.forwarder.append(url, topic, partition, frames, acks, {})
        self._produced(topic, records, sum(map(len, frames)))
        return results

    async def append_forwarded(
        self, view: TopicView, partition: int, frames: list[bytearray], acks: int
    ) -> list[AppendResult]:
        """A client's produce another broker forwarded here (it was authorized there, and
        is counted there): the same leader and backpressure rules, then the append."""
        state = self.leader(view.info.name, partition)
        q = self.queue(view, state, frames, acks, 0)
        return await state.completed(q.queued, acks, q.min_insync, self.timeout_s())

    async def catch_up(self, topic: str, partition: int) -> None:
        """A forwarded write can reach a new partition's leader before NOTIFY has told it
        that it leads: the sender's metadata is newer. Read the metadata once (a version
        query, the snapshot only when it moved) and reconcile, so the write is taken."""
        if TopicNamePartition(topic, partition) in self._broker.partitions:
            return
        await asyncio.to_thread(self._broker.cache.refresh)
        self._broker.reconcile()

    def _produced(self, topic: str, records: int, size: int) -> None:
        metrics.PRODUCED_RECORDS.labels(topic).inc(records)
        metrics.PRODUCED_BYTES.labels(topic).inc(size)

    def timeout_s(self) -> float:
        return self._broker.config.request_timeout_ms / 1000

    def leader_url(self, view: TopicView, partition: int) -> str | None:
        return self._broker.cache.leader_url_or_none(view, partition)

    def sticky_for(self, topic: str) -> StickyPartitioner:
        return self._broker.sticky_for(topic)

    def background(self, future: asyncio.Future[Any]) -> None:
        """Keep an acks=0 write referenced until it finishes."""
        self._broker.background(future)


class ProducerIds:
    """Idempotent producers' ids, from one Postgres sequence (Kafka's InitProducerId)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def allocate(self, principal: str) -> int:
        """A fresh producer id (epoch 0). Kafka's IDEMPOTENT_WRITE on the cluster is "write"
        on the cluster here; WRITE on any topic is enough too (KIP-679)."""
        self._broker.authorizer.require_cluster_or_any_topic(principal, "write")
        return await asyncio.to_thread(self._broker.partition_repo.allocate_producer_id)
