"""The 416 a fetch past the log end answers quotes the whole log across tiers (issue 18
item 7): a real partition log whose older offsets live only in the cold tier."""

from __future__ import annotations

import asyncio

import pytest

from cluster.read_contract import ColdRange, ColdRead
from ingest.replication.partition import Partition
from ingest.tiered.tiered_fetch import fetch_tiered
from logformat.errors import ErrorCode, TierlogError
from metadata.types import PartitionRecord
from tests.unit.ingest.conftest import FrameFactory, LogEnv


class StubColdTier:
    """The cold tier's range as the manifest states it: [0, `end`). Reads are not made."""

    def __init__(self, end: int) -> None:
        self.range = ColdRange(0, end)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def cold_range(
        self, topic_id: str, partition: int, fresh: bool = False
    ) -> ColdRange | None:
        return self.range

    def known_range(self, topic_id: str, partition: int) -> tuple[ColdRange | None] | None:
        return (self.range,)

    async def read(
        self,
        topic: str,
        topic_id: str,
        partition: int,
        offset: int,
        end: int,
        max_records: int,
        max_bytes: int,
    ) -> ColdRead:
        raise AssertionError("a fetch past the log end must not read the cold tier")

    async def offset_for_timestamp(
        self, topic: str, topic_id: str, partition: int, timestamp: int
    ) -> int | None:
        return None


def _tiered_leader(env: LogEnv, frame: FrameFactory) -> Partition:
    """Offsets [0, 20) written, [0, 10) deleted locally (tiered): hot [10, 20]."""
    log = env.open()
    state = Partition(log, me=1)
    state.apply(PartitionRecord("orders", env.topic_id, 0, 1, 5, [1], [1], 7))

    async def write() -> None:
        await state.append([frame(10)], acks=1, min_insync=1, timeout_s=1)
        log.roll()
        await state.append([frame(10)], acks=1, min_insync=1, timeout_s=1)

    asyncio.run(write())
    log.delete_segments_before(10)
    assert (log.log_start_offset, log.log_end_offset) == (10, 20)
    return state


def test_past_the_end_quotes_the_log_across_tiers(env: LogEnv, frame: FrameFactory) -> None:
    state = _tiered_leader(env, frame)
    with pytest.raises(TierlogError) as caught:
        asyncio.run(fetch_tiered(state, StubColdTier(12), 999_999, 10, 1 << 20, 0))
    exc = caught.value
    assert exc.code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert "outside orders-0's log [0, 20]" in str(exc), str(exc)
    assert "hot tier [10, 20]" in str(exc)
    assert exc.extra["log_start_offset"] == 0 and exc.extra["log_end_offset"] == 20


def test_without_a_cold_tier_the_hot_range_is_the_log(env: LogEnv, frame: FrameFactory) -> None:
    state = _tiered_leader(env, frame)
    with pytest.raises(TierlogError) as caught:
        asyncio.run(fetch_tiered(state, None, 999_999, 10, 1 << 20, 0))
    assert "outside orders-0's log [10, 20]" in str(caught.value)
    assert "tier" not in str(caught.value)
    assert caught.value.extra["log_start_offset"] == 10


@pytest.mark.parametrize("cold", [None, StubColdTier(12)], ids=["hot only", "tiered"])
@pytest.mark.parametrize("offset", [15, 20, 25], ids=["below end", "at end", "past end"])
def test_an_offline_copy_answers_a_storage_error_not_its_frozen_end(
    env: LogEnv, frame: FrameFactory, cold: StubColdTier | None, offset: int
) -> None:
    """A log taken offline by a failed write keeps the end it had: a leader that has not yet
    learnt it was replaced must not quote that end (416) to a consumer the new leader already
    served past it (chaos seed 1904215306), which would reset it; Kafka answers every read of
    an offline replica KAFKA_STORAGE_ERROR, and the consumer retries elsewhere."""
    state = _tiered_leader(env, frame)
    state.log._went_offline(OSError(28, "No space left on device"), "append failed")
    with pytest.raises(TierlogError) as caught:
        asyncio.run(fetch_tiered(state, cold, offset, 10, 1 << 20, 0))
    assert caught.value.code is ErrorCode.KAFKA_STORAGE_ERROR, caught.value
    assert "orders-0 is offline on this broker" in caught.value.message
    assert "disk full" in caught.value.message
