"""The broker FindCoordinator names for a transactional id (ingest/service/txn_placement.py):
one per id whoever is asked, ids spread over the brokers, and only a dead broker's ids move."""

from __future__ import annotations

from collections import Counter

from ingest.service.txn_placement import txn_coordinator_of

TIDS = [f"app-{i}" for i in range(300)]


def test_the_same_broker_whatever_order_the_brokers_are_listed_in() -> None:
    for tid in TIDS[:20]:
        assert txn_coordinator_of(tid, [1, 2, 3]) == txn_coordinator_of(tid, [3, 1, 2])


def test_ids_spread_over_every_broker() -> None:
    spread = Counter(txn_coordinator_of(tid, [1, 2, 3]) for tid in TIDS)
    assert set(spread) == {1, 2, 3} and min(spread.values()) > 50


def test_only_a_dead_brokers_ids_move_and_they_come_back() -> None:
    before = {tid: txn_coordinator_of(tid, [1, 2, 3]) for tid in TIDS}
    without_2 = {tid: txn_coordinator_of(tid, [1, 3]) for tid in TIDS}
    assert all(without_2[t] == before[t] for t in TIDS if before[t] != 2)
    assert all(without_2[t] in (1, 3) for t in TIDS)
    assert {tid: txn_coordinator_of(tid, [1, 2, 3]) for tid in TIDS} == before


def test_no_live_broker_names_none() -> None:
    assert txn_coordinator_of("app", []) is None
