"""Failed logins take turns per address and key id once they pass the free ones; a known
good key skips the queue; a turn too far off is refused with a Retry-After."""

from __future__ import annotations

import asyncio
import logging

import pytest

from cluster.auth_throttle import Attempt, AuthThrottle, AuthThrottled, ThrottleSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


SETTINGS = ThrottleSettings(free=3, delay_ms=1000, window_ms=60_000, max_wait_ms=5000)
GUESS = Attempt("kafka", "10.0.0.9", "abcdef012345", "PLAIN")


def _throttle() -> tuple[AuthThrottle, Clock]:
    clock = Clock()
    return AuthThrottle(SETTINGS, clock), clock


def _turn(t: AuthThrottle, attempt: Attempt, secret: bytes | None = None) -> None:
    async def go() -> None:
        # The wait is an asyncio.sleep; here only whether it was asked for matters.
        await asyncio.wait_for(t.turn(attempt, secret), 10)

    asyncio.run(go())


def test_free_failures_then_turns_then_refusal() -> None:
    t, _ = _throttle()
    for _ in range(3):
        _turn(t, GUESS)  # not hot yet: at once
        t.failed(GUESS, "wrong key")
    # Hot: turns are booked one second apart, so one of the next seven is over 5 s off.
    with pytest.raises(AuthThrottled) as exc:
        for _ in range(7):
            asyncio.run(_book(t, GUESS))
    assert exc.value.headers["Retry-After"] == str(exc.value.retry_after_s)
    assert exc.value.retry_after_s >= 5
    assert "too many failed authentication attempts from 10.0.0.9" in exc.value.message


async def _book(t: AuthThrottle, attempt: Attempt) -> None:
    """Book a turn without waiting it out (the sleep is cancelled at once)."""
    task = asyncio.ensure_future(t.turn(attempt))
    await asyncio.sleep(0)
    if not task.done():
        task.cancel()
    else:
        task.result()


def test_a_key_that_worked_skips_the_queue_and_others_are_unaffected() -> None:
    t, _ = _throttle()
    for _ in range(20):
        t.failed(GUESS, "wrong key")
    t.succeeded(b"tlk_good")
    _turn(t, GUESS, b"tlk_good")  # its own key: no wait even on a hot address and key id
    other = Attempt("kafka", "10.0.0.10", "999999999999", "PLAIN")
    _turn(t, other, b"tlk_other")  # another address and key id: not hot


def test_failures_expire_with_the_window() -> None:
    t, clock = _throttle()
    for _ in range(10):
        t.failed(GUESS, "wrong key")
    clock.now += 61
    asyncio.run(asyncio.wait_for(t.turn(GUESS), 1))  # cold again: at once


def test_each_failure_is_one_audit_line(caplog: pytest.LogCaptureFixture) -> None:
    t, _ = _throttle()
    with caplog.at_level(logging.WARNING, logger="tierlog.auth"):
        t.failed(GUESS, "wrong key")
        t.failed(GUESS, "wrong key")
    assert len(caplog.records) == 2
    rec = caplog.records[0]
    assert rec.getMessage() == "authentication failed: wrong key"
    assert rec.exc_info is None
    assert (rec.peer, rec.key_id, rec.mechanism) == ("10.0.0.9", "abcdef012345", "PLAIN")  # type: ignore[attr-defined]


def test_the_same_wrong_key_again_is_not_a_guess(caplog: pytest.LogCaptureFixture) -> None:
    """A client retrying one wrong key is answered at once and counts once; every failure is
    still a line."""
    t, _ = _throttle()
    with caplog.at_level(logging.WARNING, logger="tierlog.auth"):
        for _ in range(10):
            _turn(t, GUESS, b"tlk_same_wrong")
            t.failed(GUESS, "wrong key", b"tlk_same_wrong")
    assert len(caplog.records) == 10
    _turn(t, GUESS, b"tlk_another")  # one distinct failure so far: not hot
