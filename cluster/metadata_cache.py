"""A node's view of cluster metadata, refreshed from Postgres when its version moves, and the
one place brokers and fetch nodes resolve a topic, a partition and its leader."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import NamedTuple

from logformat.errors import ErrorCode, TierlogError
from metadata.brokers import BrokerRepo
from metadata.configs import TopicConfig, topic_config
from metadata.topics import TopicRepo
from metadata.types import BrokerRegistration, PartitionRecord, TopicInfo

log = logging.getLogger("tierlog.metadata_cache")


class TopicView(NamedTuple):
    info: TopicInfo
    config: TopicConfig
    partitions: list[PartitionRecord]  # indexed by partition number


class MetadataCache:
    def __init__(self, repo: TopicRepo, brokers: BrokerRepo) -> None:
        self._repo = repo
        self._broker_repo = brokers
        self._topics: dict[str, TopicView] = {}
        self.brokers: dict[int, BrokerRegistration] = {}
        self.version = -1
        self.loaded = False
        self._last_miss_refresh = 0.0

    def refresh(self, force: bool = False) -> bool:
        """Reload everything if the metadata version changed; True when something did."""
        if not force and self._repo.version() == self.version:
            return False
        # One consistent snapshot, so a half-applied change is never seen.
        version, topic_list, partition_list = self._repo.snapshot()
        self.brokers = {b.id: b for b in self._broker_repo.list()}
        infos = {t.name: t for t in topic_list}
        parts: dict[str, list[PartitionRecord]] = {name: [] for name in infos}
        for p in partition_list:
            if p.topic in parts:
                parts[p.topic].append(p)
        self._topics = {
            name: TopicView(
                info, topic_config(info.configs), sorted(parts[name], key=lambda p: p.partition)
            )
            for name, info in infos.items()
        }
        self.version = version
        self.loaded = True
        return True

    def broker_url(self, broker_id: int) -> str | None:
        info = self.brokers.get(broker_id)
        return info.url if info is not None else None

    def broker_kafka_address(self, broker_id: int) -> str | None:
        """HOST:PORT of the broker's Kafka listener as it registered it (None: unknown)."""
        info = self.brokers.get(broker_id)
        return info.kafka_address if info is not None else None

    def topic(self, name: str) -> TopicView | None:
        return self._topics.get(name)

    def topic_or_refresh(self, name: str) -> TopicView | None:
        """Like topic(), but a miss re-reads metadata (rate-limited) in case it is brand new."""
        view = self._topics.get(name)
        if view is None and time.monotonic() - self._last_miss_refresh > 0.1:
            self._last_miss_refresh = time.monotonic()
            self.refresh()
            view = self._topics.get(name)
        return view

    def topics(self) -> list[TopicView]:
        return sorted(self._topics.values(), key=lambda v: v.info.name)

    # -- lookups for request handlers --------------------------------------------------------

    async def require_topic(self, name: str, partition: int | None = None) -> TopicView:
        """The topic (and, given one, a partition it has), or UNKNOWN_TOPIC_OR_PARTITION. A
        miss re-reads metadata off the event loop, in case the topic is brand new."""
        view = self._topics.get(name)
        if view is None:
            view = await asyncio.to_thread(self.topic_or_refresh, name)
        if view is None:
            raise TierlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        if partition is not None and not 0 <= partition < len(view.partitions):
            raise TierlogError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {name!r} has partitions 0..{len(view.partitions) - 1}; got {partition}",
            )
        return view

    def leader_url_or_none(self, view: TopicView, partition: int) -> str | None:
        leader = view.partitions[partition].leader
        return self.broker_url(leader) if leader is not None else None

    def leader_url(self, view: TopicView, partition: int) -> str:
        """Where the partition's leader listens; LEADER_NOT_AVAILABLE while none is elected."""
        url = self.leader_url_or_none(view, partition)
        if url is None:
            raise TierlogError(
                ErrorCode.LEADER_NOT_AVAILABLE,
                f"{view.info.name}-{partition} has no leader right now; retry shortly",
            )
        return url
