"""The leader's high watermark and group commit, on a real partition log."""

from __future__ import annotations

import asyncio

from ingest.replication.partition import Partition, Role
from logformat.errors import ErrorCode, TierlogError
from metadata.types import PartitionRecord
from tests.unit.ingest.producer_frames import pframe


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
    time out): NOT_ENOUGH_REPLICAS before the write; a replicated write waits for the lease
    and, unconfirmed within its timeout, is REQUEST_TIMED_OUT."""

    async def run() -> None:
        lease = [True]
        state = Partition(env.open(), me=1, lease_ok=lambda: lease[0])
        state.apply(PartitionRecord("orders", env.topic_id, 0, 1, 5, [1, 2], [1, 2], 7))
        waiting = asyncio.ensure_future(state.append([frame(3)], -1, 1, timeout_s=0.5))
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


def test_a_write_replicated_in_doubt_is_acknowledged_once_the_lease_is_back(env) -> None:  # type: ignore[no-untyped-def]
    """The soak's idempotent Kafka duplicate (issue 26), as librdkafka met it: batch A is
    written and replicated while the leader's lease is in doubt (Postgres killed), batch B
    is refused (NOT_ENOUGH_REPLICAS), and once the lease is back batch C meets
    OUT_OF_ORDER_SEQUENCE_NUMBER (B is missing). librdkafka takes that as "nothing from B on
    was written", waits for A's answer and bumps its epoch, sending again under the new
    epoch whatever was not acknowledged: had A been answered an error, A would be written
    twice. A's answer waits for the lease and is A's offsets; C's is retriable, so that
    there is no bump at all."""

    async def run() -> None:
        lease = [True]
        state = Partition(env.open(), me=1, lease_ok=lambda: lease[0])
        state.apply(PartitionRecord("orders", env.topic_id, 0, 1, 5, [1, 2], [1, 2], 7))
        a = asyncio.ensure_future(state.append([pframe(seq=0, n=3)], -1, 2, timeout_s=30))
        while state.log.log_end_offset < 3:
            await asyncio.sleep(0.01)
        lease[0] = False
        state.record_follower_fetch(2, 3)  # replicated to the ISR while in doubt
        try:
            await state.append([pframe(seq=3, n=1)], -1, 2, timeout_s=5)
        except TierlogError as exc:
            assert exc.code is ErrorCode.NOT_ENOUGH_REPLICAS, exc
        else:
            raise AssertionError("took a write with the lease in doubt")
        await asyncio.sleep(0.2)
        assert not a.done()  # neither acknowledged nor refused while in doubt
        lease[0] = True
        assert [tuple(r) for r in await a] == [(0, 2)]
        try:  # C: B is missing. Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER; this leader
            # refused B itself, so a retriable error (replication/refusals.py): no epoch bump
            await state.append([pframe(seq=4, n=1)], -1, 2, timeout_s=5)
        except TierlogError as exc:
            assert exc.code is ErrorCode.NOT_ENOUGH_REPLICAS, exc
            assert "expected sequence 3, got 4" in exc.message, exc
        else:
            raise AssertionError("appended past a missing sequence")
        # A retried with its own sequence is a duplicate: its offsets, not written again.
        assert [tuple(r) for r in await state.append([pframe(seq=0, n=3)], -1, 2, 5)] == [(0, 2)]
        assert state.log.log_end_offset == 3

    asyncio.run(run())


def test_a_write_cut_and_written_over_is_not_acknowledged_by_its_old_leader(env, frame) -> None:  # type: ignore[no-untyped-def]
    """A leader in doubt holds the answer of an uncommitted acks=1 write; leadership moves,
    and before the answer is looked at again its log is cut below the write and refilled by
    the new leader up to a high watermark past it. The offsets now hold other records: the
    answer is NOT_LEADER_OR_FOLLOWER, judged by what was committed when it stopped leading,
    not by the follower's high watermark (issue 26)."""

    async def run() -> None:
        lease = [True]
        state = Partition(env.open(), me=1, lease_ok=lambda: lease[0])
        state.apply(PartitionRecord("orders", env.topic_id, 0, 1, 5, [1, 2], [1, 2], 7))
        await state.append([frame(2)], acks=1, min_insync=1, timeout_s=1)
        state.record_follower_fetch(2, 2)  # offsets 0-1 committed
        queued = state.submit([frame(3)], 1, 1)  # offsets 2-4, never replicated
        await asyncio.wait([queued])
        lease[0] = False  # in doubt before it answers
        answer = asyncio.ensure_future(state.completed(queued, 1, 1, 30))
        await asyncio.sleep(0.1)
        assert not answer.done()
        env.partition = 1  # the new leader's log: the common prefix, then its own epoch
        new_leader = env.open()
        new_leader.append([frame(2)], leader_epoch=5, now_ms=1)
        new_leader.append([frame(4)], leader_epoch=6, now_ms=1)
        payload = b"".join(bytes(d) for _, d in new_leader.read(2, 1 << 20))
        # All before the waiter runs again: it follows, is cut to 2 and refilled to 6.
        state.apply(PartitionRecord("orders", env.topic_id, 0, 2, 6, [1, 2], [2], 8))
        state.truncate_to(2)
        state.append_replicated(memoryview(payload), leader_hw=6)
        assert state.high_watermark == 6
        try:
            await answer
        except TierlogError as exc:
            assert exc.code is ErrorCode.NOT_LEADER_OR_FOLLOWER, exc
        else:
            raise AssertionError("acknowledged offsets another leader wrote over")

    asyncio.run(run())
