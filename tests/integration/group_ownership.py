"""Who owned which partition when, for test_groups.py's "never two owners" check: members
heartbeat from threads and every interval of ownership is recorded."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class SessionLapsed(Exception):
    """The coordinator no longer knows the member (UNKNOWN_MEMBER_ID): its session lapsed,
    e.g. while a loaded machine delayed its heartbeats. Right by Kafka's rules (KIP-848): the
    member has lost its partitions and rejoins."""


class GroupMember(Protocol):
    id: str
    owned: set[tuple[str, int]]
    interval_ms: int
    join_sent: float  # monotonic time the last (re)join was sent: its session began after
    join_got: float  # ... and answered: it owns what that answer granted from then on

    def beat(self) -> None: ...  # raises SessionLapsed

    def rejoin(self) -> None: ...


Interval = tuple[str, tuple[str, int], float, float]  # (member, partition, from, until)


class Ownership:
    """Members heartbeating from threads, and the intervals in which each owned each
    partition: from the answer that granted it to the heartbeat that stopped reporting it
    (for a member that goes quiet, or learns its session lapsed: its last heartbeat + the
    session timeout, when a well-behaved consumer stops)."""

    def __init__(self, session_ms: int) -> None:
        self.session_ms = session_ms
        self.intervals: list[Interval] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.silent_deadline = float("inf")
        self.errors: list[BaseException] = []
        self.rejoins = 0  # sessions that lapsed although the member kept beating
        self.beats = 0  # answered heartbeats, all members

    def run(self, m: GroupMember, quiet_after: float | None) -> None:
        since = dict.fromkeys(m.owned, m.join_got)
        started = time.monotonic()
        last_sent = m.join_sent  # the session was last renewed no earlier than this
        try:
            while not self.stop.is_set():
                sent = time.monotonic()
                if quiet_after is not None and sent - started > quiet_after:
                    self._quiet(m, since, last_sent)
                    return
                try:
                    released = self._beat(m, since, sent)
                except SessionLapsed:
                    since = self._rejoin(m, since, last_sent)
                    last_sent = m.join_sent
                    continue
                last_sent = sent
                # Released partitions are reported at once, as a consumer would after revoking.
                time.sleep(0.05 if released else m.interval_ms / 1000)
            self._record(m, since, time.monotonic())
        except BaseException as exc:
            self.errors.append(exc)

    def raise_errors(self) -> None:
        """Fail at once when a member's thread failed: it beats no more, so waiting on the
        group to settle could only time out without saying why."""
        with self.lock:
            if self.errors:
                raise RuntimeError(f"a member's thread failed: {self.errors[0]!r}")

    def _rejoin(
        self, m: GroupMember, since: dict[tuple[str, int], float], last_sent: float
    ) -> dict[tuple[str, int], float]:
        """Its session lapsed: it lost its partitions when the session may have lapsed (as
        the quiet member's), then joins again as a new member."""
        with self.lock:
            self.rejoins += 1
        self._record(m, since, last_sent + self.session_ms / 1000)
        m.rejoin()
        return dict.fromkeys(m.owned, m.join_got)

    def _quiet(self, m: GroupMember, since: dict[tuple[str, int], float], last_sent: float) -> None:
        """Stop consuming when the session may have lapsed."""
        with self.lock:
            self.silent_deadline = last_sent + self.session_ms / 1000
        self._record(m, since, self.silent_deadline)

    def _beat(self, m: GroupMember, since: dict[tuple[str, int], float], sent: float) -> bool:
        """One heartbeat; whether it released partitions."""
        before = set(m.owned)
        m.beat()
        got = time.monotonic()
        with self.lock:
            self.beats += 1
            for tp in before - m.owned:
                self.intervals.append((m.id, tp, since.pop(tp), sent))
        for tp in m.owned - before:
            since[tp] = got
        return bool(before - m.owned)

    def _record(self, m: GroupMember, since: dict[tuple[str, int], float], until: float) -> None:
        with self.lock:
            for tp, t0 in since.items():
                self.intervals.append((m.id, tp, t0, until))


def assert_never_two_owners(intervals: list[Interval]) -> None:
    for i, (m1, tp1, s1, e1) in enumerate(intervals):
        for m2, tp2, s2, e2 in intervals[i + 1 :]:
            if tp1 == tp2 and m1 != m2:
                assert e1 <= s2 or e2 <= s1, f"{tp1} owned by two members at once"
