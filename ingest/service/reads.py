"""Fetch and list-offsets for both front-ends (HTTP's records and offsets routes, Kafka's
Fetch and ListOffsets): which partition state serves a read, the tiered read itself (the
cold reader only when the topic is tiered), and the fetch metrics, each once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from cluster.search_run import PartitionSearch, search_partition
from ingest import metrics
from ingest.service.txn_log import txn_log
from ingest.service.txn_partition import TxnView
from ingest.tiered import tiered_fetch
from ingest.tiered.tiered_search import LocalHot
from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicNamePartition

if TYPE_CHECKING:
    from cluster.metadata_cache import TopicView
    from cluster.read_contract import ColdReader, FetchResult
    from cluster.search_contract import ColdSearcher
    from ingest.broker import Broker
    from ingest.replication.partition import Partition


class Reads:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def cold_reader(self, topic: str) -> ColdReader | None:
        """The broker's cold reader when the topic is tiered (None: hot reads only)."""
        cold = self._broker.cold_reader
        if cold is None:
            return None
        view = self._broker.cache.topic(topic)
        return cold if view is not None and view.config.remote_storage_enable else None

    def search_here(
        self, view: TopicView, partition: int, search: PartitionSearch
    ) -> AsyncIterator[dict[str, Any]] | None:
        """A search of a partition this broker leads: its cold files (when the topic is
        tiered and this node has the cold searcher), then its hot log as read_committed
        sees it (as HTTP fetches read; tiering leaves aborted records out of the cold tier).
        None: not led here."""
        state = self.leader_state(view.info.name, partition)
        if state is None:
            return None
        cold = self._broker.cold_searcher if view.config.remote_storage_enable else None
        return self._committed_search(search, cold, state)

    async def _committed_search(
        self, search: PartitionSearch, cold: ColdSearcher | None, state: Partition
    ) -> AsyncIterator[dict[str, Any]]:
        txns = await self.txn_view(state, committed=True)
        async for event in search_partition(
            search, cold, LocalHot(state, (txns.apply, txns.stable))
        ):
            yield event

    async def topic(
        self, principal: str, topic: str, operation: str, partition: int | None = None
    ) -> TopicView:
        """The topic (and partition), once `principal` may `operation` it."""
        self._broker.authorizer.require(principal, "topic", topic, operation)
        return await self._broker.cache.require_topic(topic, partition)

    async def leader(self, principal: str, topic: str, partition: int, operation: str) -> Partition:
        """The partition this broker must lead to serve a read that is never forwarded
        (Kafka's), else NOT_LEADER_OR_FOLLOWER."""
        await self.topic(principal, topic, operation, partition)
        return self._broker.require_leader(topic, partition)

    def leader_state(self, topic: str, partition: int) -> Partition | None:
        return self._broker.leader_state(topic, partition)

    def replica(self, topic: str, partition: int) -> Partition | None:
        """This broker's replica of the partition, led or followed (None: not hosted)."""
        return self._broker.partitions.get(TopicNamePartition(topic, partition))

    async def fetch(
        self,
        state: Partition,
        offset: int | None,
        max_records: int,
        max_bytes: int,
        wait_ms: int = 0,
        trim: Callable[[FetchResult], FetchResult] | None = None,
        txns: TxnView | None = None,
        committed: bool = False,
    ) -> FetchResult:
        """Records from whichever tier holds `offset` (cut by `trim`: what the caller will
        answer; then by `txns`: what its isolation level may see, or with `committed` by the
        read_committed view taken once a long poll's wait is over, as the records it waited
        for may have moved the last stable offset), counted in the fetch metrics. Below the
        hot log with no cold reader here, the refusal says where the records are."""
        topic = state.topic
        cold = self.cold_reader(topic)
        try:
            got = await tiered_fetch.fetch_tiered(
                state, cold, offset, max_records, max_bytes, wait_ms
            )
        except TierlogError as exc:
            if (
                cold is None
                and exc.code is ErrorCode.OFFSET_OUT_OF_RANGE
                and offset is not None
                and offset < state.log.log_start_offset
            ):
                hint = await self._broker.tier_status.out_of_range(state, offset)
                if hint is not None:  # no cold reader here (S3 not configured)
                    raise hint from None
            raise
        if trim is not None:
            got = trim(got)
        if txns is None and committed:
            txns = await self.txn_view(state, committed=True)
        if txns is not None:
            got = txns.apply(got, offset or 0)
        metrics.FETCHED_RECORDS.labels(topic).inc(got.batch.num_rows)
        return got

    async def txn_view(self, state: Partition, committed: bool) -> TxnView:
        """What a read of `state` may see: read_committed (HTTP always; Kafka by its
        isolation level) stops at the last stable offset and skips aborted records; both
        levels skip the transaction markers."""
        return await txn_log(self._broker).view(state, committed)

    async def stable_offset(self, state: Partition) -> int:
        """The last stable offset: read_committed's end (ListOffsets LATEST)."""
        return await txn_log(self._broker).stable_offset(state)

    async def record_at(self, state: Partition, offset: int, max_bytes: int) -> FetchResult:
        """The one record at `offset`, from whichever tier holds it, not counted as served
        (list-offsets reads it for its timestamp)."""
        cold = self.cold_reader(state.topic)
        return await tiered_fetch.fetch_tiered(state, cold, offset, 1, max_bytes, 0)

    def log_append_time(self, topic: str) -> bool:
        """The topic stamps records with the broker's time (LogAppendTime)."""
        view = self._broker.cache.topic(topic)
        return view is not None and view.config.message_timestamp_type == "LogAppendTime"

    async def earliest(self, state: Partition) -> int:
        """The log start of the whole log, hot and cold."""
        return await tiered_fetch.earliest(state, self.cold_reader(state.topic))

    async def offset_for_timestamp(self, state: Partition, timestamp: int) -> int | None:
        cold = self.cold_reader(state.topic)
        return await tiered_fetch.offset_for_timestamp(state, cold, timestamp)
