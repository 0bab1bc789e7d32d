"""Backpressure from tiering (ingest/tiered/untiered_bound.py), on real brokers: with no
tiering worker, a broker past --max-untiered-bytes answers client produce with 503
THROTTLING_QUOTA_EXCEEDED + Retry-After (also through a forwarding node), followers keep
replicating, and produce goes through again once tiering catches up; the Python client
waits it out as a retriable error."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for
from tests.integration.tiering_catch_up import tier_everything
from tierlog import Producer

BOUND = 3000  # bytes: a few 1 KiB segments


@pytest.fixture
def cluster(fresh_db: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(fresh_db, tmp_path, 2, extra=["--max-untiered-bytes", str(BOUND)]).start()
    yield c
    c.stop()


def _produce(b: BrokerProcess, topic: str, i: int) -> httpx.Response:
    value = "x" * 300 + str(i)  # two records of ~300 bytes: a 1 KiB segment each request
    records = [{"key": f"k{i}", "value": value, "partition": 0}, {"value": value, "partition": 0}]
    return b.http.post(f"/topics/{topic}/records?acks=all", json={"records": records})


def _until_refused(b: BrokerProcess, topic: str) -> tuple[httpx.Response, int]:
    """Produce until the broker refuses; the refusal and how many requests it acknowledged."""
    deadline = time.monotonic() + 30
    acked = 0
    while time.monotonic() < deadline:
        r = _produce(b, topic, acked)
        if r.status_code != 200:
            return r, acked
        acked += 1
        time.sleep(0.05)
    raise AssertionError(f"produce never refused; {acked} requests acknowledged")


def _metric(b: BrokerProcess, name: str, topic: str | None = None) -> float | None:
    for line in b.http.get("/metrics").text.splitlines():
        if line.startswith(name) and (topic is None or f'topic="{topic}"' in line):
            return float(line.rsplit(" ", 1)[1])
    return None


def _create(c: Cluster, name: str) -> str:
    r = c.any().http.post(
        "/topics",
        json={
            "name": name,
            "partitions": 1,
            "replication_factor": 2,
            "configs": {"segment.bytes": 1024, "min.insync.replicas": 2},
        },
    )
    assert r.status_code == 201, r.text
    wait_for("full ISR", lambda: len(c.partition(name)["isr"]) == 2)
    return str(r.json()["id"])


def _assert_backpressure(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "1"
    doc: dict[str, Any] = r.json()
    assert doc["error_code"] == "THROTTLING_QUOTA_EXCEEDED"
    assert "not yet copied to the cold tier" in doc["message"]
    assert doc["max_untiered_bytes"] == BOUND and doc["untiered_bytes"] > BOUND
    return doc


def test_produce_waits_for_tiering_and_replication_goes_on(cluster: Cluster, fresh_db: str) -> None:
    topic_id = _create(cluster, "bp")
    leader = cluster.leader("bp")
    follower = cluster.any(exclude=leader.broker_id)
    refused, acked = _until_refused(leader, "bp")
    _assert_backpressure(refused)
    _assert_backpressure(_produce(follower, "bp", 0))  # forwarded: same status and wait
    lag = _metric(leader, "tierlog_remote_copy_lag_bytes", "bp")
    assert lag is not None and lag > 0
    age = _metric(leader, "tierlog_remote_copy_lag_seconds", "bp")
    assert age is not None and age >= 0
    # Replication is not pushed back: the follower holds every acknowledged record.
    p = cluster.partition("bp")
    assert p["high_watermark"] == 2 * acked and len(p["isr"]) == 2, p

    # A client's send made while refused completes once tiering catches up (it retries).
    with Producer(leader.url, linger_ms=0) as producer:
        future = producer.send("bp", b"after the wait", partition=0)
        catch_up = threading.Timer(1.5, tier_everything, (fresh_db, topic_id))
        catch_up.start()
        meta = future.result(timeout=60)
        catch_up.join()
    assert meta.offset >= 2 * acked
    wait_for("produce accepted again", lambda: _produce(leader, "bp", 1).status_code == 200)

    # Tiering keeps up from here, as a worker would: the produce just above sealed a segment
    # the one catch-up could not hold (the gauge read 0 only if looked at before it was sealed).
    def caught_up() -> bool:
        tier_everything(fresh_db, topic_id)
        return _metric(leader, "tierlog_remote_copy_lag_bytes", "bp") == 0

    wait_for("no copy lag", caught_up, every=0.5)


def test_topic_without_tiering_is_never_pushed_back(cluster: Cluster, fresh_db: str) -> None:
    _create(cluster, "bp-lag")
    r = cluster.any().http.post(
        "/topics",
        json={
            "name": "hot-only",
            "partitions": 1,
            "replication_factor": 2,
            "configs": {"segment.bytes": 1024, "remote.storage.enable": "false"},
        },
    )
    assert r.status_code == 201, r.text
    leader = cluster.leader("bp-lag")
    _assert_backpressure(_until_refused(leader, "bp-lag")[0])
    hot_leader: Callable[[], BrokerProcess] = lambda: cluster.leader("hot-only")  # noqa: E731
    for i in range(6):
        r = _produce(hot_leader(), "hot-only", i)
        assert r.status_code == 200, r.text
