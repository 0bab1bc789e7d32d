"""tierlog dev's count of fast failures: a server that dies before it was ever ready failed to
start, however long its start-up took (a loaded machine makes start-ups slow); one that served
and ran a while did not."""

from __future__ import annotations

import sys

from tierlog.devstack.supervisor import FAST_EXIT_S, Child


def _exited(child: Child, ran_s: float) -> None:
    child.start()
    assert child.proc is not None
    child.proc.wait(30)
    child.started_at -= ran_s  # as if it had run that long
    child.exited()


def _child(port: int | None) -> Child:
    return Child("fetch" if port else "tiering", [sys.executable, "-c", "pass"], {}, port)


def test_a_server_that_exits_before_it_is_ready_fails_fast_however_slow_its_start() -> None:
    child = _child(port=1)  # nothing answers there: never ready
    for n in (1, 2, 3):
        _exited(child, ran_s=FAST_EXIT_S * 3)
        assert child.fast_failures == n
    assert "3 times in a row before it was ready" in child.why()


def test_a_server_that_was_ready_and_ran_a_while_starts_the_count_over() -> None:
    child = _child(port=1)
    _exited(child, ran_s=1)
    assert child.fast_failures == 1
    child.start()
    assert child.proc is not None
    child.proc.wait(30)
    child.started_at -= FAST_EXIT_S * 3
    child.ready = True  # what the supervisor records once /readyz answered
    child.exited()
    assert child.fast_failures == 0


def test_a_worker_without_a_port_is_judged_by_the_clock() -> None:
    child = _child(port=None)
    _exited(child, ran_s=1)
    assert child.fast_failures == 1
    _exited(child, ran_s=FAST_EXIT_S * 3)
    assert child.fast_failures == 0
