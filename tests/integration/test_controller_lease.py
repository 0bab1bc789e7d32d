"""The controller lease against a real Postgres: one holder at a time, expiry, epochs."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy.engine import Engine

from metadata.brokers import BrokerRepo
from metadata.controller_lease import ControllerLease
from metadata.db import make_engine
from metadata.topics import TopicRepo


@pytest.fixture
def brokers(db_engine: Engine) -> BrokerRepo:
    repo = BrokerRepo(db_engine)
    for i in range(1, 9):
        repo.register(i, f"http://127.0.0.1:{9000 + i}", 60_000)
    return repo


def test_one_holder_at_a_time_renewal_keeps_the_epoch(
    db_engine: Engine, fresh_db: str, brokers: BrokerRepo
) -> None:
    other_engine = make_engine(fresh_db)  # a second process, as far as Postgres can tell
    try:
        a, b = ControllerLease(db_engine), ControllerLease(other_engine)
        assert a.holder() == (None, 0)
        assert a.try_acquire(1, 60_000) == 1
        assert b.try_acquire(2, 60_000) is None
        assert a.try_acquire(1, 60_000) == 1  # renewal: same epoch
        assert b.holder() == (1, 1)
        assert b.release(2) is False  # not the holder: nothing happens
        assert a.holder() == (1, 1)
    finally:
        other_engine.dispose()


def test_takeover_after_expiry_bumps_the_epoch(db_engine: Engine, brokers: BrokerRepo) -> None:
    a, b = ControllerLease(db_engine), ControllerLease(db_engine)
    assert a.try_acquire(1, 300) == 1
    assert b.try_acquire(2, 60_000) is None
    time.sleep(0.45)
    assert a.holder() == (None, 1)
    assert b.try_acquire(2, 60_000) == 2
    assert a.try_acquire(1, 60_000) is None
    assert a.holder() == (2, 2)


def test_reacquiring_an_own_expired_lease_starts_a_new_epoch(
    db_engine: Engine, brokers: BrokerRepo
) -> None:
    lease = ControllerLease(db_engine)
    assert lease.try_acquire(1, 200) == 1
    time.sleep(0.3)
    assert lease.try_acquire(1, 60_000) == 2


def test_release_lets_another_broker_take_over_at_once(
    db_engine: Engine, brokers: BrokerRepo
) -> None:
    a, b = ControllerLease(db_engine), ControllerLease(db_engine)
    topics = TopicRepo(db_engine)
    v0 = topics.version()
    assert a.try_acquire(1, 60_000) == 1
    v1 = topics.version()
    assert v1 > v0  # a new controller is a metadata change (GET /brokers shows it)
    assert a.try_acquire(1, 60_000) == 1
    assert topics.version() == v1  # renewals are not
    assert a.release(1) is True
    assert a.holder() == (None, 1)
    assert b.try_acquire(2, 60_000) == 2


def test_only_a_live_broker_can_hold_the_lease(db_engine: Engine, brokers: BrokerRepo) -> None:
    lease = ControllerLease(db_engine)
    assert lease.try_acquire(99, 60_000) is None  # never registered
    assert lease.try_acquire(3, 60_000) == 1
    brokers.deregister(3)
    assert lease.try_acquire(3, 60_000) is None  # cannot renew either
    assert lease.try_acquire(4, 60_000) == 2  # a dead holder holds nothing: takeover at once
    with pytest.raises(ValueError):
        lease.try_acquire(4, 0)


def test_racing_brokers_exactly_one_wins(db_engine: Engine, brokers: BrokerRepo) -> None:
    barrier = threading.Barrier(8)

    def attempt(broker_id: int) -> int | None:
        lease = ControllerLease(db_engine)
        barrier.wait()
        return lease.try_acquire(broker_id, 60_000)

    with ThreadPoolExecutor(8) as pool:
        results = dict(zip(range(1, 9), pool.map(attempt, range(1, 9)), strict=True))
    winners = {k: v for k, v in results.items() if v is not None}
    assert list(winners.values()) == [1]
    assert ControllerLease(db_engine).holder() == (next(iter(winners)), 1)


def test_a_dead_brokers_lease_ends_and_so_does_its_controller_lease(
    db_engine: Engine, brokers: BrokerRepo
) -> None:
    """end_lease (a broker proven dead, ingest/replication/death_signal.py) ends only the
    incarnation found dead: a broker that registered again since is alive and stays so."""
    lease = ControllerLease(db_engine)
    assert lease.try_acquire(1, 60_000) is not None
    first = brokers.get(1)
    assert first is not None and first.alive
    again = brokers.register(1, "http://127.0.0.1:9001", 60_000)  # restarted meanwhile
    assert brokers.end_lease(1, first.incarnation) is False
    assert brokers.get(1).alive  # type: ignore[union-attr]
    assert brokers.end_lease(1, again.incarnation) is True
    assert not brokers.get(1).alive  # type: ignore[union-attr]
    assert lease.holder()[0] is None  # a dead holder's controller lease is void
    assert lease.try_acquire(2, 60_000) is not None
    assert brokers.end_lease(1, again.incarnation) is False  # already ended: nothing to do


def test_lapses_in_is_when_the_lease_may_lapse_and_zero_when_free(
    db_engine: Engine, brokers: BrokerRepo
) -> None:
    """What a broker that is not the controller waits for before it tries again: the
    lease's own expiry or its holder's broker lease, whichever ends first."""
    lease = ControllerLease(db_engine)
    assert lease.lapses_in_s() == 0.0  # never held
    assert lease.try_acquire(1, 30_000) == 1
    assert 25.0 < lease.lapses_in_s() <= 30.0  # the controller lease ends first
    brokers.register(1, "http://127.0.0.1:9001", 5_000)  # a shorter broker lease
    assert 0.0 < lease.lapses_in_s() <= 5.0  # the holder's broker lease ends first
    assert lease.release(1)
    assert lease.lapses_in_s() == 0.0
    assert lease.try_acquire(2, 30_000) == 2
    brokers.deregister(2)
    assert lease.lapses_in_s() == 0.0  # a dead holder holds nothing
