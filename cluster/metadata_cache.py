"""The broker's view of cluster metadata, refreshed from Postgres when its version moves."""

from __future__ import annotations

import logging
import time
from typing import NamedTuple

from metadata.brokers import BrokerRepo
from metadata.configs import TopicConfig, topic_config
from metadata.topics import TopicRepo
from metadata.types import BrokerInfo, PartitionInfo, TopicInfo

log = logging.getLogger("tierlog.metadata_cache")


class TopicView(NamedTuple):
    info: TopicInfo
    config: TopicConfig
    partitions: list[PartitionInfo]  # indexed by partition number


class MetadataCache:
    def __init__(self, repo: TopicRepo, brokers: BrokerRepo) -> None:
        self._repo = repo
        self._broker_repo = brokers
        self._topics: dict[str, TopicView] = {}
        self.brokers: dict[int, BrokerInfo] = {}
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
        parts: dict[str, list[PartitionInfo]] = {name: [] for name in infos}
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
