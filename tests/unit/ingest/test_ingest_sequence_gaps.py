"""A sequence gap the leader made itself (it refused a pipelined batch, then the next one
arrived once the reason was gone) is answered retriably, not OUT_OF_ORDER_SEQUENCE_NUMBER,
which makes librdkafka bump its producer epoch and re-send unacknowledged messages where no
broker can tell them from new ones (chaos seed 1904215306; ingest/replication/refusals.py)."""

from __future__ import annotations

import asyncio

import pytest

from cluster.clock import ManualClock
from ingest.replication.partition import Partition, Role
from ingest.replication.refusals import WINDOW_S, ahead
from logformat.errors import ErrorCode, TierlogError
from metadata.types import PartitionRecord
from tests.unit.ingest.conftest import LogEnv
from tests.unit.ingest.producer_frames import pframe


def _record(env: LogEnv, isr: list[int], partition_epoch: int = 7) -> PartitionRecord:
    return PartitionRecord("orders", env.topic_id, 0, 1, 5, [1, 2, 3], isr, partition_epoch)


def _leader(env: LogEnv, clock: ManualClock, isr: list[int]) -> Partition:
    state = Partition(env.open(), me=1, clock=clock)
    state.apply(_record(env, isr))
    assert state.role is Role.LEADER
    return state


async def _append(state: Partition, seq: int, acks: int = 1) -> list[tuple[int, int]] | ErrorCode:
    try:
        done = await state.append([pframe(seq=seq)], acks, min_insync=2, timeout_s=1)
    except TierlogError as exc:
        return exc.code
    return [(r.base_offset, r.last_offset) for r in done]


def _refused_then_gap(env: LogEnv, clock: ManualClock, wait_s: float) -> list[object]:
    """Sequence 0 taken, sequence 2 refused (acks=all, the ISR below min.insync.replicas),
    the ISR whole again, then after `wait_s` the pipelined batch at sequence 4 and the
    client's retries in order."""

    async def run() -> list[object]:
        state = _leader(env, clock, isr=[1])
        assert await _append(state, 0) == [(0, 1)]
        answers: list[object] = [await _append(state, 2, acks=-1)]
        state.set_isr(_record(env, [1, 2], partition_epoch=8))
        clock.advance(wait_s)
        answers.append(await _append(state, 4))
        answers.append(state.log.log_end_offset)
        answers += [await _append(state, 2), await _append(state, 4)]
        return answers

    return asyncio.run(run())


def test_a_gap_after_the_leaders_own_refusal_is_retriable(env: LogEnv) -> None:
    answers = _refused_then_gap(env, ManualClock(), wait_s=0.02)
    assert answers[0] is ErrorCode.NOT_ENOUGH_REPLICAS
    assert answers[1] is ErrorCode.NOT_ENOUGH_REPLICAS  # Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER
    assert answers[2] == 2  # nothing written
    assert answers[3:] == [[(2, 3)], [(4, 5)]]  # the retries, in order, same epoch


def test_a_gap_long_after_a_refusal_is_out_of_order(env: LogEnv) -> None:
    """The client's own gap (messages it gave up) is still reported, once the window passed."""
    answers = _refused_then_gap(env, ManualClock(), wait_s=WINDOW_S + 1)
    assert answers[1] is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_without_a_refusal_a_gap_is_out_of_order(env: LogEnv) -> None:
    async def run() -> list[object]:
        state = _leader(env, ManualClock(), isr=[1, 2])
        return [await _append(state, 0), await _append(state, 4)]

    assert asyncio.run(run()) == [[(0, 1)], ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]


def test_a_batch_behind_the_next_sequence_is_never_excused(env: LogEnv) -> None:
    """Only a batch ahead of the producer's next sequence can follow a refused one; an older
    one (beyond the five remembered batches) is out of order whatever happened before."""

    async def run() -> list[object]:
        state = _leader(env, ManualClock(), isr=[1])
        for seq in range(0, 14, 2):
            await _append(state, seq)
        refused = await _append(state, 14, acks=-1)  # ISR [1]: refused, noted
        return [refused, await _append(state, 0)]

    assert asyncio.run(run()) == [
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    ]


@pytest.mark.parametrize(
    ("sequence", "expected", "is_ahead"),
    [
        (5, 4, True),
        (4, 4, False),
        (3, 4, False),
        (0, 2**31 - 1, True),  # wrapped past 2^31 - 1
        (2**31 - 1, 0, False),  # just behind, across the wrap
    ],
)
def test_ahead_follows_the_wrapping_sequence(sequence: int, expected: int, is_ahead: bool) -> None:
    assert ahead(sequence, expected) is is_ahead
