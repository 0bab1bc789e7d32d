"""Replica choice for segment downloads, and the worker's /metrics + /healthz server."""

from __future__ import annotations

import datetime as dt
import urllib.error
import urllib.request

import pytest

from cluster.worker_health import Health, serve_metrics
from metadata.types import BrokerRegistration, PartitionRecord
from tiering import metrics
from tiering.segment_source import replica_order, segment_path

NOW = dt.datetime.now(dt.UTC)


def broker(i: int, alive: bool = True) -> BrokerRegistration:
    return BrokerRegistration(i, f"http://b{i}", alive, NOW)


def part(leader: int | None, isr: list[int]) -> PartitionRecord:
    return PartitionRecord("t", "id", 0, leader, 0, [1, 2, 3], isr, 0)


def test_followers_first_then_leader_only_alive_in_sync() -> None:
    everyone = [broker(1), broker(2), broker(3, alive=False)]
    assert [b.id for b in replica_order(part(1, [1, 2, 3]), everyone)] == [2, 1]
    assert [b.id for b in replica_order(part(2, [2]), everyone)] == [2]
    assert replica_order(part(None, [3]), everyone) == []  # out-of-sync replicas never serve


def test_segment_path_is_the_contract_route() -> None:
    assert segment_path("t", 3, 42) == "/internal/topics/t/partitions/3/segments/42"


def test_metrics_and_health_endpoints() -> None:
    health = Health(stale_s=60)
    server = serve_metrics("127.0.0.1", 0, health)
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        metrics.FAILURES.labels("download").inc()
        body = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
        assert "tierlog_tiering_failures_total" in body
        assert urllib.request.urlopen(f"{base}/healthz", timeout=5).status == 200
        health.last -= 120
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{base}/healthz", timeout=5)
        assert e.value.code == 503
    finally:
        server.shutdown()
        server.server_close()
