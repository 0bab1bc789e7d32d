"""A broker's controlled shutdown (ingest/replication/handover.py): a partition nobody could
take is not held back, and the partitions it leads are handed over together, so the wait for
followers to catch up is the shutdown's, not each partition's in turn."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from ingest.log.local_log import LocalLog, LogConfig
from ingest.replication import handover
from ingest.replication.partition import Partition, Role
from metadata.partition_state import PartitionStateRepo
from metadata.types import PartitionRecord, TopicIdPartition
from tests.unit.ingest.conftest import LogEnv

ME = 2


class NobodyTakesIt:
    """Postgres' answer when no successor qualifies (PartitionStateRepo.hand_over: None)."""

    def __init__(self) -> None:
        self.asked: list[TopicIdPartition] = []

    def hand_over(self, tp: TopicIdPartition, *args: object, **kwargs: object) -> None:
        self.asked.append(tp)


@pytest.fixture
def logs(env: LogEnv) -> Iterator[list[LocalLog]]:
    opened = [
        LocalLog.open(
            str(env.root / f"orders-{p}"), "orders", env.topic_id, p, env.index, LogConfig()
        )
        for p in range(4)
    ]
    yield opened
    for log_ in opened:
        log_.close()


def _led(log_: LocalLog, isr: list[int]) -> Partition:
    state = Partition(log_, me=ME)
    record = PartitionRecord("orders", log_.topic_id, log_.partition, ME, 1, [1, 2, 3], isr, 1)
    state.apply(record)
    assert state.role is Role.LEADER
    return state


def _repo(fake: NobodyTakesIt) -> PartitionStateRepo:
    return fake  # type: ignore[return-value]


def test_with_no_other_replica_in_sync_it_resigns_at_once(logs: list[LocalLog]) -> None:
    async def run() -> None:
        state, repo = _led(logs[0], isr=[ME]), NobodyTakesIt()
        resigning = asyncio.ensure_future(handover.resign(_repo(repo), ME, state, 3600))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        done = resigning.done()
        resigning.cancel()
        assert done, "waited for a follower no replica could be"
        assert resigning.result() is None and not state.handing_off and repo.asked == []

    asyncio.run(run())


def test_the_partitions_it_leads_are_handed_over_together(
    logs: list[LocalLog], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handover, "RESIGN_S", 0.2)

    async def run() -> None:
        # A follower in the ISR that has not fetched yet: each partition waits for it.
        states, repo = [_led(log_, isr=[1, ME]) for log_ in logs], NobodyTakesIt()
        shutdown = asyncio.ensure_future(
            handover.hand_over_leaderships(
                _repo(repo),
                ME,
                {
                    (s.topic, s.partition): s
                    for s in states  # type: ignore[misc]
                },
            )
        )
        for _ in range(5):
            await asyncio.sleep(0)
        waiting = [s.handing_off for s in states]
        assert waiting == [True] * len(states), waiting  # all at once, not one after another
        assert await shutdown == 0
        assert sorted(tp.partition for tp in repo.asked) == [0, 1, 2, 3]
        assert not any(s.handing_off for s in states)  # not moved: each leads on until stopped

    asyncio.run(run())
