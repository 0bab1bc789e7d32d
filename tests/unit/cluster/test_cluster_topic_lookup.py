"""The one topic/partition/leader lookup brokers and fetch nodes share (MetadataCache)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from cluster.metadata_cache import MetadataCache
from logformat.errors import ErrorCode, TierlogError
from metadata.types import BrokerRegistration, PartitionRecord, TopicInfo

NOW = datetime.now(UTC)


class _Topics:
    def __init__(self, leaders: list[int | None]) -> None:
        self.info = TopicInfo("id-1", "orders", len(leaders), 1, {}, NOW)
        self.parts = [
            PartitionRecord("orders", "id-1", p, b, 0, [1], [1], 0) for p, b in enumerate(leaders)
        ]

    def version(self) -> int:
        return 1

    def snapshot(self) -> tuple[int, list[TopicInfo], list[PartitionRecord]]:
        return 1, [self.info], self.parts


class _Brokers:
    def list(self) -> list[BrokerRegistration]:
        return [BrokerRegistration(1, "http://b1", True, NOW)]


def _cache(leaders: list[int | None]) -> MetadataCache:
    cache = MetadataCache(cast(Any, _Topics(leaders)), cast(Any, _Brokers()))
    cache.refresh(True)
    return cache


def _code(call: Any) -> ErrorCode:
    with pytest.raises(TierlogError) as err:
        asyncio.run(call) if asyncio.iscoroutine(call) else call()
    return err.value.code


def test_a_known_topic_and_partition_resolve_to_the_leader() -> None:
    cache = _cache([1, None])
    view = asyncio.run(cache.require_topic("orders", 1))
    assert cache.leader_url(view, 0) == "http://b1"
    assert cache.leader_url_or_none(view, 1) is None


def test_unknown_topics_and_partitions_and_missing_leaders_have_their_codes() -> None:
    cache = _cache([1, None])
    assert _code(cache.require_topic("nope")) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _code(cache.require_topic("orders", 2)) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    view = asyncio.run(cache.require_topic("orders"))
    assert _code(lambda: cache.leader_url(view, 1)) is ErrorCode.LEADER_NOT_AVAILABLE
