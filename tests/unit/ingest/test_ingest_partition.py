"""The leader's high watermark and group commit, on a real partition log."""

from __future__ import annotations

import asyncio

from ingest.replication.partition import Partition, Role
from logformat.errors import ErrorCode, TierlogError
from metadata.types import PartitionRecord


def _leader(env, isr: list[int]) -> Partition:  # type: ignore[no-untyped-def]
    state = Partition(env.open(), me=1)
    state.apply(PartitionRecord("orders", env.topic_id, 0, 1, 5, [1, 2, 3], isr, 7))
    assert state.role is Role.LEADER
    return state


def test_high_watermark_is_the_minimum_over_the_isr(env, frame) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        state = _leader(env, [1, 2])
        await state.append([frame(10)], acks=1, min_insync=1, timeout_s=1)
        assert state.high_watermark == 0  # follower 2 has not fetched yet
        state.record_follower_fetch(2, 6)
        assert state.high_watermark == 6
        state.record_follower_fetch(3, 2)  # not in the ISR: does not hold the watermark
        state.record_follower_fetch(2, 10)
        assert state.high_watermark == 10

    asyncio.run(run())


def test_pending_isr_expansion_holds_the_watermark(env, frame) -> None:  # type: ignore[no-untyped-def]
    """Kafka's maximal ISR: once the leader asks to add a member, the controller may elect it,
    so the watermark must not pass what that member has until the change is settled."""

    async def run() -> None:
        state = _leader(env, [1, 2])
        await state.append([frame(10)], acks=1, min_insync=1, timeout_s=1)
        state.record_follower_fetch(3, 4)
        state.record_follower_fetch(2, 4)
        assert state.isr_expansion(3) == [1, 2, 3]
        state.begin_isr_change([1, 2, 3])
        state.record_follower_fetch(2, 10)
        assert state.high_watermark == 4  # member 3 (pending) has only 4
        state.record_follower_fetch(3, 10)
        assert state.high_watermark == 10
        state.end_isr_change()

    asyncio.run(run())


def test_concurrent_requests_share_one_log_write(env, frame) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        state = _leader(env, [1])
        writes = []
        original = state.log.append

        def counting(frames, *args):  # type: ignore[no-untyped-def]
            writes.append(len(frames))
            return original(frames, *args)

        state.log.append = counting  # type: ignore[method-assign]
        results = await asyncio.gather(
            *(state.append([frame(2)], acks=1, min_insync=1, timeout_s=1) for _ in range(10))
        )
        assert writes == [10]  # ten requests, one coalesced write
        assert sorted(r[0].base_offset for r in results) == list(range(0, 20, 2))
        assert state.high_watermark == 20

    asyncio.run(run())


def test_a_leader_in_doubt_never_answers_not_leader_in_its_own_epoch(env, frame) -> None:  # type: ignore[no-untyped-def]
    """Its lease unconfirmed, a leader refuses writes with retriable errors that do not say
    "not leader" (its epoch stands; librdkafka would park the partition until its messages
    time out): NOT_ENOUGH_REPLICAS before the write, REQUEST_TIMED_OUT once replicated."""

    async def run() -> None:
        lease = [True]
        state = Partition(env.open(), me=1, lease_ok=lambda: lease[0])
        state.apply(PartitionRecord("orders", env.topic_id, 0, 1, 5, [1, 2], [1, 2], 7))
        waiting = asyncio.ensure_future(state.append([frame(3)], -1, 1, timeout_s=5))
        while state.log.log_end_offset < 3:  # written, waiting for follower 2
            await asyncio.sleep(0.01)
        lease[0] = False  # lapses while the write is being replicated
        state.record_follower_fetch(2, 3)
        try:
            await waiting
        except TierlogError as exc:
            assert exc.code is ErrorCode.REQUEST_TIMED_OUT, exc
        else:
            raise AssertionError("acknowledged with the lease in doubt")
        try:
            await state.append([frame(3)], -1, 1, timeout_s=5)
        except TierlogError as exc:
            assert exc.code is ErrorCode.NOT_ENOUGH_REPLICAS, exc
        else:
            raise AssertionError("took a write with the lease in doubt")

    asyncio.run(run())
