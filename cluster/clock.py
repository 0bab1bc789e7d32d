"""The time a node's duties read, passed in (Kafka's `Time` / `MockTime`).

Leases, follower progress (the ISR's lag rule), log-reopen backoff and segment rolls read
this clock instead of `time`, so a test can run brokers on a `ManualClock` and move time on
at once instead of sleeping. What the event loop waits on (a client's request deadline, a
long poll) stays on the loop's own time: those are waits, not decisions.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (leases, lags, backoffs)."""
        ...

    def time(self) -> float:
        """Seconds since the epoch (wall time: record timestamps, segment ages)."""
        ...


class SystemClock:
    """The process's clocks: what every node uses outside tests."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


SYSTEM_CLOCK: Clock = SystemClock()


class ManualClock:
    """Time that moves only when told to (Kafka's MockTime): both readings advance together.
    Thread-safe, since duties read it from worker threads too."""

    def __init__(self, monotonic: float = 1_000.0, wall: float | None = None) -> None:
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self._wall = time.time() if wall is None else wall

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic

    def time(self) -> float:
        with self._lock:
            return self._wall

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} s)")
        with self._lock:
            self._monotonic += seconds
            self._wall += seconds
