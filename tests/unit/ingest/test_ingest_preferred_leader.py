"""When a leader moves leadership back to its preferred replica
(ingest/replication/preferred_leader.py)."""

from __future__ import annotations

import asyncio

from ingest.replication.partition import Partition, Role
from ingest.replication.preferred_leader import PreferredLeaderMover, Timing
from logformat.errors import ErrorCode, TierlogError
from metadata.types import PartitionRecord


def _state(env, leader: int, isr: list[int]) -> Partition:  # type: ignore[no-untyped-def]
    state = Partition(env.open(), me=2)
    state.apply(PartitionRecord("orders", env.topic_id, 0, leader, 1, [1, 2, 3], isr, 1))
    return state


def _mover(timing: Timing) -> PreferredLeaderMover:
    return PreferredLeaderMover(2, dict, None, asyncio.sleep, timing)  # type: ignore[arg-type]


def test_due_once_the_preferred_replica_was_in_sync_long_enough(env) -> None:  # type: ignore[no-untyped-def]
    mover, key = _mover(Timing(delay_s=1, interval_s=5)), ("orders", 0)
    state = _state(env, leader=2, isr=[2, 3])
    assert state.role is Role.LEADER
    assert not mover.due(key, state, 100)  # the preferred replica (1) is not in the ISR
    state.isr = [1, 2, 3]
    assert not mover.due(key, state, 100)  # in sync since now
    assert not mover.due(key, state, 100.5)
    assert mover.due(key, state, 101)
    mover._last_try[key] = 101
    assert not mover.due(key, state, 104)  # at most one try per interval
    assert mover.due(key, state, 106)
    state.isr = [2, 3]
    assert not mover.due(key, state, 200)  # out of sync again: the clock starts over
    state.isr = [1, 2, 3]
    assert not mover.due(key, state, 200)


def test_never_due_for_a_follower_or_the_preferred_leader_itself(env) -> None:  # type: ignore[no-untyped-def]
    mover = _mover(Timing(delay_s=0, interval_s=0))
    follower = _state(env, leader=1, isr=[1, 2, 3])
    assert follower.role is Role.FOLLOWER and not mover.due(("orders", 0), follower, 0)


def test_a_leader_handing_off_acknowledges_nothing(env, frame) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        state = _state(env, leader=2, isr=[1, 2, 3])
        state.handing_off = True
        try:
            await state.append([frame(1)], acks=1, min_insync=1, timeout_s=1)
        except TierlogError as exc:
            assert exc.code is ErrorCode.NOT_ENOUGH_REPLICAS  # retriable; the epoch stands
        else:
            raise AssertionError("appended while handing off")
        assert state.log.log_end_offset == 0

    asyncio.run(run())
