"""A node's one LISTEN connection (cluster/notify_hub.py) on a real Postgres: every channel on
one session, each NOTIFY to its channel's subscribers only, a catch-up on every start and
reconnect, and the session's end with the last subscription (a broker's death signal proves
a process gone by that session's absence)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url

from cluster.notify_hub import NotifyHub, Subscription

DEADLINE_S = 20.0
APP = "tierlog-notify-hub-test"


def wait_until(what: str, cond: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
        time.sleep(0.02)


class Heard:
    """What one subscription's callbacks saw."""

    def __init__(self) -> None:
        self.catch_ups = 0
        self.payloads: list[str] = []
        self._lock = threading.Lock()

    def caught_up(self) -> None:
        with self._lock:
            self.catch_ups += 1

    def payload(self, p: str) -> None:
        with self._lock:
            self.payloads.append(p)


def sessions(engine: Engine) -> list[int]:
    stmt = text("SELECT pid FROM pg_stat_activity WHERE application_name = :n")
    with engine.connect() as conn:
        return [int(pid) for (pid,) in conn.execute(stmt, {"n": APP})]


def notify(engine: Engine, channel: str, payload: str) -> None:
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_notify(:c, :p)"), {"c": channel, "p": payload})


@pytest.fixture
def hub(db_engine: Engine) -> NotifyHub:
    url = make_url(db_engine.url.render_as_string(hide_password=False))
    return NotifyHub(url.update_query_dict({"application_name": APP}).render_as_string(False))


@pytest.fixture
def started(hub: NotifyHub) -> Iterator[list[Subscription]]:
    subs: list[Subscription] = []
    yield subs
    for sub in subs:
        sub.stop()


def start(subs: list[Subscription], hub: NotifyHub, channel: str) -> Heard:
    heard = Heard()
    sub = hub.subscribe(channel, heard.caught_up, heard.payload)
    sub.start()
    subs.append(sub)
    assert sub.connected.wait(DEADLINE_S), f"{channel}: never connected"
    return heard


def test_every_channel_on_one_session_each_notify_to_its_own(
    db_engine: Engine, hub: NotifyHub, started: list[Subscription]
) -> None:
    a, b = start(started, hub, "hub_test_a"), start(started, hub, "hub_test_b")
    assert (a.catch_ups, b.catch_ups) == (1, 1)
    assert len(sessions(db_engine)) == 1
    notify(db_engine, "hub_test_a", "one")
    notify(db_engine, "hub_test_b", "two")
    notify(db_engine, "hub_test_a", "three")
    wait_until("both heard", lambda: len(a.payloads) == 2 and len(b.payloads) == 1)
    assert (a.payloads, b.payloads) == (["one", "three"], ["two"])


def test_a_lost_connection_clears_connected_then_catches_up_again(
    db_engine: Engine, hub: NotifyHub, started: list[Subscription]
) -> None:
    heard = start(started, hub, "hub_test_c")
    (pid,) = sessions(db_engine)
    with db_engine.begin() as conn:
        conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
    wait_until("reconnected, caught up", lambda: heard.catch_ups == 2)
    assert started[0].connected.wait(DEADLINE_S)
    wait_until("a new session", lambda: sessions(db_engine) not in ([], [pid]))
    notify(db_engine, "hub_test_c", "after")
    wait_until("heard after the reconnect", lambda: heard.payloads == ["after"])


def test_a_late_start_joins_the_live_session_and_a_stop_hears_no_more(
    db_engine: Engine, hub: NotifyHub, started: list[Subscription]
) -> None:
    first = start(started, hub, "hub_test_d")
    (pid,) = sessions(db_engine)
    late = start(started, hub, "hub_test_e")  # waits for its LISTEN and catch-up
    assert late.catch_ups == 1 and first.catch_ups == 1
    assert sessions(db_engine) == [pid]
    started[0].stop()
    assert not started[0].connected.is_set()
    notify(db_engine, "hub_test_d", "unheard")
    notify(db_engine, "hub_test_e", "heard")
    wait_until("the live subscription heard", lambda: late.payloads == ["heard"])
    assert first.payloads == []


def test_the_session_ends_with_the_last_subscription(
    db_engine: Engine, hub: NotifyHub, started: list[Subscription]
) -> None:
    start(started, hub, "hub_test_f")
    start(started, hub, "hub_test_g")
    started[0].stop()
    time.sleep(0.2)
    assert len(sessions(db_engine)) == 1  # one subscription still holds it
    started[1].stop()
    wait_until("the session gone", lambda: sessions(db_engine) == [])
    again = start(started, hub, "hub_test_f")  # a new start opens a new one
    assert again.catch_ups == 1 and len(sessions(db_engine)) == 1
