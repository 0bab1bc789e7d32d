"""An idle tiering worker sleeps until there is work (cluster/wakeups.py): a segment
registered, a claim released or a deadline Postgres knows (retry_at) wakes it, not a timer.
Each worker here runs with a 10-minute safety-net poll, so a turn within the deadlines below
can only come from a NOTIFY or a deadline the worker read from Postgres."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from botocore.exceptions import EndpointConnectionError
from deltalake.exceptions import TableNotFoundError
from sqlalchemy import text

from cluster.wakeups import Wakeups
from metadata.types import TopicIdPartition
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.tiering_env import Env, env_fixture, rec  # noqa: F401 (fixture)
from tiering.worker import TieringWorker

NEVER_MS = 600_000  # the safety net never fires within a test
DEADLINE_S = 30.0


def wait_until(what: str, cond: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
        time.sleep(0.05)


def tiered(env: Env, topic: str) -> int:
    """Records in the topic's Delta table (0 before its first commit)."""
    try:
        return len(env.delta_rows(topic))
    except TableNotFoundError:
        return 0


class Turns(list[float]):
    """When each turn (run_once call) began, and whether the worker is idle: asleep in
    `Wakeups.wait` with nothing notified since its turn began."""

    def __init__(self) -> None:
        super().__init__()
        self.idle = threading.Event()

    def since(self, t: float) -> int:
        return sum(1 for began in self if began > t)

    def wake_after(self, what: str, change: Callable[[], None]) -> None:
        """`change` made while the worker sleeps must start a turn. From an idle worker
        only: a notification that lands while a turn is still running is absorbed by the
        next turn, which then starts before the change and would not count. Counted from
        before the change: the NOTIFY can start the turn before the commit call returns."""
        wait_until("the worker idle", self.idle.is_set)
        begun = time.monotonic()
        change()
        wait_until(what, lambda: self.since(begun) >= 1)


@pytest.fixture
def running(env: Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TieringWorker, Turns]]:
    """A worker in its loop and its turns."""
    turns = Turns()

    class ObservedWakeups(Wakeups):
        def wait(self, timeout_s: float, stop: threading.Event, *, notified: bool = True) -> None:
            if notified and not self._event.is_set():
                turns.idle.set()
            try:
                super().wait(timeout_s, stop, notified=notified)
            finally:
                turns.idle.clear()

    monkeypatch.setattr("tiering.worker.Wakeups", ObservedWakeups)
    worker = env.worker("idle")
    run_once = worker.run_once

    def counted() -> int:
        turns.append(time.monotonic())
        return run_once()

    worker.run_once = counted  # type: ignore[method-assign]
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(NEVER_MS, stop), daemon=True)
    thread.start()
    yield worker, turns
    stop.set()
    thread.join(timeout=DEADLINE_S)
    assert not thread.is_alive()
    worker.close()


def test_a_segment_registered_while_idle_is_tiered_without_a_poll(
    env: Env, running: tuple[TieringWorker, Turns]
) -> None:
    _, turns = running
    env.topic("woken", 1)
    wait_until("the first turn", lambda: len(turns) >= 1)
    end = env.add_segment("woken", 0, 0, [rec(i) for i in range(10)])
    wait_until("the segment tiered", lambda: tiered(env, "woken") == 10)
    env.add_segment("woken", 0, end, [rec(i) for i in range(end, end + 5)])
    wait_until("the next segment tiered", lambda: tiered(env, "woken") == 15)
    env.assert_exact("woken")


def test_a_release_and_its_retry_at_wake_the_worker(
    env: Env, running: tuple[TieringWorker, Turns]
) -> None:
    """A segment that is not claimable yet (backing off) wakes the worker when it is
    released (NOTIFY) and again when its retry_at comes (a deadline read from Postgres)."""
    worker, turns = running
    tid = env.topic("later", 1)
    wait_until("the first turn", lambda: len(turns) >= 1)
    env.add_segment("later", 0, 0, [rec(i) for i in range(10)])
    wait_until("tiered", lambda: tiered(env, "later") == 10)
    tp = TopicIdPartition(tid, 0)

    def insert() -> None:  # a second segment, claimed by a worker that then fails
        with env.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO hot_segments (topic_id, partition, base_offset, end_offset,"
                    " size_bytes, state, claimed_by, claim_expires_at)"
                    " VALUES (:t, 0, 10, 20, 1, 'tiering', 'gone', now() + interval '1 hour')"
                ),
                {"t": tp.topic_id},
            )

    def release() -> None:  # released with a backoff of 2 s
        with env.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE hot_segments SET state = 'sealed', claimed_by = NULL,"
                    " claim_expires_at = NULL, retry_at = now() + interval '2 seconds'"
                    " WHERE topic_id = :t AND base_offset = 10"
                ),
                {"t": tp.topic_id},
            )

    turns.wake_after("woken by the insert", insert)
    turns.wake_after("woken by the release", release)
    assert worker.registry.next_due_s() is not None  # not claimable yet: a deadline ahead
    # At retry_at the worker claims it (no replica serves it: the claim fails, is released
    # again with a longer backoff, and the worker keeps waking for it).
    wait_until(
        "claimed at its retry_at",
        lambda: env.registry.segments(tp)[-1].attempts >= 1,
    )


def test_a_turn_failing_on_an_outage_is_retried_within_seconds(
    env: Env, running: tuple[TieringWorker, Turns]
) -> None:
    """S3 or Postgres away for one turn: the worker backs off from a second, not from its
    idle safety net (10 minutes here), and the segment registered meanwhile is tiered."""
    worker, turns = running
    env.topic("outage", 1)
    wait_until("the first turn", lambda: len(turns) >= 1)
    run_once = worker.run_once
    failed: list[int] = []

    def once_unreachable() -> int:
        if not failed:
            failed.append(1)
            raise EndpointConnectionError(endpoint_url="http://s3.invalid")
        return run_once()

    worker.run_once = once_unreachable  # type: ignore[method-assign]
    env.add_segment("outage", 0, 0, [rec(i) for i in range(10)])  # wakes it: the turn fails
    wait_until("the failed turn", lambda: bool(failed))
    wait_until("tiered after the outage", lambda: tiered(env, "outage") == 10)
    env.assert_exact("outage")
