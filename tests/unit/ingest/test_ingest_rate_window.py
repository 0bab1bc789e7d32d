"""The quota rate window (Kafka's sampled Rate) and the throttle time it yields, on a fake
clock; the quota table's per-key resolution; the quota manager's cache and accounting."""

from __future__ import annotations

import asyncio

import pytest

from cluster.http.quota_manager import CLUSTER_PRINCIPAL, QuotaKind, QuotaManager
from cluster.http.rate_window import RateWindow
from metadata.quotas import DEFAULT_ENTITY, QuotaEntry, QuotaTable


def test_rate_over_the_elapsed_window_with_a_one_sample_floor() -> None:
    w = RateWindow(samples=11, sample_s=1.0)
    w.record(1000, now=100.2)
    assert w.window_s(100.2) == 1.0  # floored at one sample
    assert w.rate(100.2) == 1000
    w.record(1000, now=103.5)
    assert w.window_s(103.5) == pytest.approx(3.5)  # from the oldest sample's start (100)
    assert w.rate(103.5) == pytest.approx(2000 / 3.5)


def test_samples_older_than_the_window_are_forgotten() -> None:
    w = RateWindow(samples=3, sample_s=1.0)
    w.record(500, now=10.0)
    w.record(700, now=12.9)
    assert w.total(12.9) == 1200
    assert w.total(13.0) == 700  # sample 10 left the 3-sample window
    assert w.idle(15.0)
    assert w.rate(15.0) == 0


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    w = RateWindow(samples=11, sample_s=1.0)
    quota = 1000.0
    w.record(3000, now=50.0)  # 3000 B at the start of a sample: 3x the quota
    throttle = w.throttle_s(quota, now=50.0)
    assert throttle == pytest.approx(3.0)  # the window must grow to 3000 B / 1000 B/s
    # Waiting exactly that long with no more bytes puts the rate at the quota.
    assert w.rate(50.0 + throttle) == pytest.approx(quota)
    assert w.throttle_s(quota, now=53.0) == 0.0
    w.record(1000, now=53.0)
    assert w.throttle_s(quota, now=53.0) == pytest.approx(1.0)


def test_under_the_quota_there_is_no_throttle_and_the_cap_is_the_window() -> None:
    w = RateWindow(samples=11, sample_s=1.0)
    w.record(900, now=1.0)
    assert w.throttle_s(1000, now=1.0) == 0.0
    w.record(10**9, now=1.5)
    assert w.throttle_s(1000, now=1.5) == 11.0  # never longer than the whole window


def test_a_greedy_sender_that_waits_as_told_gets_the_quota() -> None:
    """Simulate a client sending 10 KB requests back to back, waiting the throttle time when
    refused: over 10 s it is accepted within a few percent of the quota."""
    w = RateWindow()
    quota, size, now, accepted = 100_000.0, 10_000, 0.0, 0
    while now < 10.0:
        wait = w.throttle_s(quota, now)
        if wait > 0:
            now += wait
            continue
        w.record(size, now)
        accepted += size
        now += 0.001
    assert abs(accepted - quota * 10) <= 0.05 * quota * 10


def test_quota_table_resolves_each_key_principal_then_default() -> None:
    table = QuotaTable(
        {
            "User:alice": QuotaEntry("User:alice", 500, None),
            DEFAULT_ENTITY: QuotaEntry(DEFAULT_ENTITY, 100, 200),
        }
    )
    assert table.rate("User:alice", "producer_byte_rate") == 500
    assert table.rate("User:alice", "consumer_byte_rate") == 200  # alice sets no fetch rate
    assert table.rate("User:bob", "producer_byte_rate") == 100
    assert QuotaTable().rate("User:bob", "producer_byte_rate") is None


def test_quota_manager_loads_in_the_background_and_never_throttles_the_cluster() -> None:
    now = [0.0]
    table = QuotaTable({DEFAULT_ENTITY: QuotaEntry(DEFAULT_ENTITY, 1000, None)})

    async def scenario() -> None:
        qm = QuotaManager(lambda: table, refresh_s=3.0, clock=lambda: now[0])
        assert qm.quota(QuotaKind.PRODUCE, "User:a") is None  # not loaded yet: unlimited
        await asyncio.sleep(0.05)  # the background load
        assert qm.quota(QuotaKind.PRODUCE, "User:a") == 1000
        qm.record(QuotaKind.PRODUCE, "User:a", 3000)
        assert qm.throttle_ms(QuotaKind.PRODUCE, "User:a") == 3000
        assert qm.throttle_ms(QuotaKind.PRODUCE, "User:b") == 0  # windows are per principal
        assert qm.throttle_ms(QuotaKind.FETCH, "User:a") == 0  # no consumer quota
        qm.record(QuotaKind.PRODUCE, CLUSTER_PRINCIPAL, 10**9)
        assert qm.throttle_ms(QuotaKind.PRODUCE, CLUSTER_PRINCIPAL) == 0

    asyncio.run(scenario())
