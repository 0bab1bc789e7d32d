"""What a client knows of the cluster: partitions per topic, their leaders, broker URLs.

Requests go straight to a partition's leader (GET /topics/{t} names the leader's id, GET
/brokers its URL, and every answer's X-Tierlog-Leader header confirms it), falling back to a
bootstrap node, which forwards, when the leader is unknown or unreachable. Everything here
runs on the client's I/O loop; other threads only read the dictionaries.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, NamedTuple
from urllib.parse import quote

from tierlog.client.http import AsyncHttp, normalize_url
from tierlog.client.types import TopicPartition


class PartitionInfo(NamedTuple):
    partition: int
    leader: int | None
    leader_epoch: int


class TopicMetadata(NamedTuple):
    name: str
    partitions: tuple[PartitionInfo, ...]
    fetched_at: float  # time.monotonic()


def parse_partitions(doc: Any) -> tuple[PartitionInfo, ...]:
    """A topic's partitions from GET /topics/{topic} (the API's TopicDescription)."""
    return tuple(
        PartitionInfo(int(p["partition"]), p.get("leader"), int(p.get("leader_epoch") or 0))
        for p in sorted(doc["partitions"], key=lambda p: int(p["partition"]))
    )


def parse_brokers(doc: Any) -> dict[int, str]:
    """The live brokers' URLs by id, from GET /brokers (the API's BrokerList)."""
    return {
        int(b["id"]): normalize_url(b["url"])
        for b in doc.get("brokers", [])
        if b.get("url") and b.get("alive", True)
    }


def topic_path(topic: str) -> str:
    return "/topics/" + quote(topic, safe="")


class ClusterMetadata:
    def __init__(self, http: AsyncHttp, *, max_age_ms: int, timeout_s: float) -> None:
        self.http = http
        self.max_age_s = max_age_ms / 1000
        self.timeout_s = timeout_s
        self._topics: dict[str, TopicMetadata] = {}
        self._brokers: dict[int, str] = {}
        self._brokers_at = 0.0
        self._leaders: dict[TopicPartition, str] = {}  # learnt from X-Tierlog-Leader
        self._stale: set[str] = set()
        self._pending: dict[str, asyncio.Future[TopicMetadata]] = {}

    # --- reads (any thread) ---
    def cached(self, topic: str) -> TopicMetadata | None:
        return self._topics.get(topic)

    def partition_count(self, topic: str) -> int | None:
        meta = self._topics.get(topic)
        return len(meta.partitions) if meta is not None else None

    def wants_refresh(self, topic: str) -> bool:
        meta = self._topics.get(topic)
        return (
            meta is None
            or topic in self._stale
            or time.monotonic() - meta.fetched_at > self.max_age_s
        )

    def leader_url(self, tp: TopicPartition) -> str:
        """The URL to send a partition's requests to: its leader if known and reachable."""
        endpoints = self.http.endpoints
        url = self._leaders.get(tp)
        if url is not None and endpoints.usable(url):
            return url
        meta = self._topics.get(tp.topic)
        if meta is not None and tp.partition < len(meta.partitions):
            leader = meta.partitions[tp.partition].leader
            url = self._brokers.get(leader) if leader is not None else None
            if url is not None and endpoints.usable(url):
                return url
        return endpoints.pick()

    # --- updates (the I/O loop) ---
    def note_leader(self, tp: TopicPartition, header: str | None) -> None:
        if header:
            self._leaders[tp] = normalize_url(header)

    def invalidate(self, tp: TopicPartition) -> None:
        """The route to `tp` failed: forget its leader and refresh the topic before reuse."""
        self._leaders.pop(tp, None)
        self._stale.add(tp.topic)

    async def topic(self, topic: str, *, force: bool = False) -> TopicMetadata:
        """The topic's metadata, fetched when missing, stale or old (one fetch at a time)."""
        meta = self._topics.get(topic)
        if meta is not None and not force and not self.wants_refresh(topic):
            return meta
        pending = self._pending.get(topic)
        if pending is None:
            pending = asyncio.ensure_future(self._fetch(topic))
            self._pending[topic] = pending
            pending.add_done_callback(lambda _f: self._pending.pop(topic, None))
        return await asyncio.shield(pending)

    async def _fetch(self, topic: str) -> TopicMetadata:
        deadline = time.monotonic() + self.timeout_s
        doc = await self.http.call_any("GET", topic_path(topic), deadline=deadline)
        parts = parse_partitions(doc)
        old = self._topics.get(topic)
        meta = TopicMetadata(topic, parts, time.monotonic())
        self._topics[topic] = meta
        self._stale.discard(topic)
        if old is not None:
            # A leader that changed makes a learnt X-Tierlog-Leader URL stale too.
            for new, prev in zip(parts, old.partitions, strict=False):
                if new.leader != prev.leader or new.leader_epoch != prev.leader_epoch:
                    self._leaders.pop(TopicPartition(topic, new.partition), None)
        leaders = {p.leader for p in parts if p.leader is not None}
        old_brokers = time.monotonic() - self._brokers_at > self.max_age_s
        if old_brokers or not leaders <= self._brokers.keys():
            # Routing still works through any node; the next refresh tries again.
            with contextlib.suppress(Exception):
                await self.refresh_brokers(deadline)
        return meta

    async def refresh_brokers(self, deadline: float | None = None) -> dict[int, str]:
        end = deadline if deadline is not None else time.monotonic() + self.timeout_s
        doc: Any = await self.http.call_any("GET", "/brokers", deadline=end)
        self._brokers = parse_brokers(doc)
        self._brokers_at = time.monotonic()
        return dict(self._brokers)
