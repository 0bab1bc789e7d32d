"""The injected clock: a manual clock moves only when told to, both readings together."""

from __future__ import annotations

import pytest

from cluster.clock import SYSTEM_CLOCK, ManualClock


def test_manual_clock_moves_only_on_advance() -> None:
    clock = ManualClock(monotonic=50.0, wall=1_700_000_000.0)
    assert (clock.monotonic(), clock.time()) == (50.0, 1_700_000_000.0)
    assert (clock.monotonic(), clock.time()) == (50.0, 1_700_000_000.0)
    clock.advance(2.5)
    assert (clock.monotonic(), clock.time()) == (52.5, 1_700_000_002.5)
    with pytest.raises(ValueError, match="cannot go back"):
        clock.advance(-1)
    assert clock.monotonic() == 52.5


def test_system_clock_never_goes_back() -> None:
    first = SYSTEM_CLOCK.monotonic()
    assert SYSTEM_CLOCK.monotonic() >= first
