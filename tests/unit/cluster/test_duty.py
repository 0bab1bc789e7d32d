"""The duty base (cluster/duty.py) on a manual clock: an outage (a retriable failure) backs
off and logs one line, a bug logs its traceback and is counted, success resets the wait, and
duties start and stop by key as roles change."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest
from sqlalchemy.exc import OperationalError

from cluster.clock import ManualClock
from cluster.duty import DUTY_FAILURES, Backoff, Duties, Duty
from failures.families import UnavailableError

NO_JITTER = Backoff(max_s=8.0, jitter=0.0)


class Script:
    """A duty's turns: each raises the next scripted exception (None: succeeds)."""

    def __init__(self, *outcomes: BaseException | None) -> None:
        self.outcomes = list(outcomes)
        self.turns = 0

    async def __call__(self) -> None:
        self.turns += 1
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome


def _clocked(clock: ManualClock, waits: list[float], stop_after: int) -> object:
    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.advance(seconds)
        if len(waits) > stop_after:
            raise asyncio.CancelledError

    return sleep


def _failures(name: str, kind: str) -> float:
    return DUTY_FAILURES.labels(name, kind)._value.get()


def test_an_outage_backs_off_and_success_resets_the_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, waits = ManualClock(), []
    outage = OperationalError("SELECT 1", {}, Exception("connection refused"))
    script = Script(outage, UnavailableError("S3", "503"), outage, outage, None, None)
    duty = Duty("t-outage", script, 1.0, backoff=NO_JITTER, sleep=_clocked(clock, waits, 6))  # type: ignore[arg-type]
    before = _failures("t-outage", "outage")
    with caplog.at_level(logging.INFO, "tierlog.duty"), pytest.raises(asyncio.CancelledError):
        asyncio.run(duty.run())
    # period, then 2, 4, 8 (capped), 8 after the four outages, then back to the period
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0, 1.0, 1.0]
    assert clock.monotonic() == 1_000.0 + sum(waits)
    assert _failures("t-outage", "outage") - before == 4
    assert duty.policy.bugs == 0
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 4 and all(r.exc_info is None for r in warned)  # one line each
    assert any("recovered" in r.getMessage() for r in caplog.records)


def test_a_bug_is_logged_with_its_traceback_counted_and_does_not_back_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, waits = ManualClock(), []
    script = Script(KeyError("partition"), KeyError("partition"), None)
    duty = Duty("t-bug", script, 1.0, backoff=NO_JITTER, sleep=_clocked(clock, waits, 3))  # type: ignore[arg-type]
    before = _failures("t-bug", "bug")
    with caplog.at_level(logging.INFO, "tierlog.duty"), pytest.raises(asyncio.CancelledError):
        asyncio.run(duty.run())
    assert waits == [1.0, 1.0, 1.0, 1.0]
    assert _failures("t-bug", "bug") - before == 2
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and all(r.exc_info is not None for r in errors)
    assert errors[0].__dict__["duty"] == "t-bug"


def test_log_lines_carry_the_duty_s_context(caplog: pytest.LogCaptureFixture) -> None:
    ctx = {"topic": "orders", "partition": 3}
    duty = Duty("t-ctx", Script(ValueError("bad")), 1.0, context=ctx)
    with caplog.at_level(logging.ERROR, "tierlog.duty"):
        assert asyncio.run(duty.run_once()) is False
    record = caplog.records[-1].__dict__
    assert (record["duty"], record["topic"], record["partition"]) == ("t-ctx", "orders", 3)


def test_jitter_stays_within_its_fraction() -> None:
    rng = random.Random(7)
    delays = [Backoff(max_s=100, jitter=0.2).delay(1.0, 3, rng) for _ in range(200)]
    assert all(6.4 <= d <= 9.6 for d in delays)


def test_cancel_stops_a_duty_and_keys_start_and_stop_with_roles() -> None:
    async def scenario() -> None:
        turns = Script()
        duties = Duties()
        key = ("orders", 0, "retention")
        duties.start(key, Duty("t-role", turns, 0.001))
        duties.start(key, Duty("t-role", turns, 0.001))  # already running: not twice
        assert key in duties and len(duties) == 1
        while turns.turns < 3:
            await asyncio.sleep(0.001)
        await duties.stop(key)  # leadership lost
        stopped_at = turns.turns
        await asyncio.sleep(0.02)
        assert key not in duties and turns.turns == stopped_at
        duties.start(key, Duty("t-role", turns, 0.001))  # leadership back
        await duties.stop_all()
        assert len(duties) == 0

    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


def test_wake_runs_a_turn_now_once_per_turn_under_way_and_stop_ends_it() -> None:
    """A woken turn runs at once, outside the period; wakes while it runs add none; stop()
    cancels it with the loop; after stop, wakes do nothing."""

    async def scenario() -> tuple[int, int, int]:
        release = asyncio.Event()
        turns = 0

        async def turn() -> None:
            nonlocal turns
            turns += 1
            await release.wait()

        duty = Duty("t-wake", turn, 3600.0)
        duty.start()  # its first periodic turn is an hour away
        duty.wake()
        await asyncio.sleep(0)
        duty.wake()  # the woken turn is still under way: nothing more
        await asyncio.sleep(0)
        during = turns
        release.set()
        await asyncio.sleep(0.01)
        duty.wake()  # the last one ended: a new turn
        await asyncio.sleep(0.01)
        after = turns
        release.clear()
        duty.wake()
        await asyncio.sleep(0)
        await duty.stop(timeout_s=1)  # cancels the woken turn waiting on `release`
        duty.wake()
        await asyncio.sleep(0.01)
        return during, after, turns

    assert asyncio.run(scenario()) == (1, 2, 3)
