"""Replication across real broker processes: acks, failover, elections, what kill -9 and
SIGSTOP show. The deterministic cases (ISR shrink and expand, min.insync.replicas, unclean
election, fencing, truncation on divergence, storage errors) run in process on a manual clock:
tests/harness/."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.cluster import Cluster, wait_for


@pytest.fixture(scope="module")
def _shared(db_factory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:  # type: ignore[no-untyped-def]
    c = Cluster(db_factory(), tmp_path_factory.mktemp("replication"), 3).start()
    yield c
    c.stop()


@pytest.fixture
def cluster(_shared: Cluster) -> Iterator[Cluster]:
    """One cluster for the whole file (each test has topics of its own): starting three
    brokers per test cost more than most checks. A test's killed or paused brokers come back
    before the next one starts, so each begins with three live brokers."""
    yield _shared
    for b in _shared.brokers.values():
        if b.paused:
            b.kill(signal.SIGCONT)
        if b.proc is None or b.proc.poll() is not None:
            b.start(wait=False)
    for b in _shared.brokers.values():
        b.wait_ready()
    wait_for(
        "all brokers alive again",
        lambda: all(x["alive"] for x in _shared.any().http.get("/brokers").json()["brokers"]),
    )


def _create(c: Cluster, name: str, partitions: int = 1, rf: int = 3, **configs: object) -> None:
    c.create_topic(name, partitions, rf, **configs)


def _produce(
    c: Cluster,
    topic: str,
    values: list[str],
    acks: str = "all",
    via: int | None = None,
    partition: int = 0,
) -> tuple[int, dict]:
    b = c.brokers[via] if via else c.any()
    r = b.http.post(
        f"/topics/{topic}/records",
        params={"acks": acks},
        json={"records": [{"value": v, "partition": partition} for v in values]},
    )
    return r.status_code, r.json()


def _produce_ok(c: Cluster, topic: str, values: list[str], **kw: Any) -> list[int]:
    """Appended exactly once (idempotent, retried through leader changes)."""
    return [o["offset"] for o in c.produce(topic, [{"value": v} for v in values], **kw)]


def test_replicas_hold_identical_bytes_and_any_node_routes(cluster: Cluster) -> None:
    _create(cluster, "rep", partitions=3, min_insync_replicas=2)
    for via in (1, 2, 3):
        for p in range(3):
            status, doc = _produce(
                cluster, "rep", [f"via{via}-p{p}-{i}" for i in range(50)], via=via, partition=p
            )
            assert status == 200, doc
    for p in range(3):
        info = cluster.partition("rep", p)
        assert info["high_watermark"] == 150 and sorted(info["isr"]) == [1, 2, 3]
        leader = cluster.brokers[info["leader"]]
        # Consumers read through any node; the answer names the leader.
        for b in cluster.brokers.values():
            r = b.http.get(
                f"/topics/rep/partitions/{p}/records", params={"offset": 0, "max_records": 1000}
            )
            assert r.status_code == 200 and len(r.json()["records"]) == 150
            assert r.headers["x-tierlog-leader"] == leader.url
        copies = wait_for(
            "replicas to converge",
            lambda p=p: (  # type: ignore[misc]
                len({cluster.segment_bytes(b, "rep", p) for b in cluster.brokers.values()}) == 1
                and [cluster.segment_bytes(b, "rep", p) for b in cluster.brokers.values()]
            ),
        )
        assert len(copies[0]) > 0


def test_leader_failover_loses_no_acknowledged_record(cluster: Cluster) -> None:
    _create(cluster, "fail", min_insync_replicas=2)
    acked = _produce_ok(cluster, "fail", [f"before-{i}" for i in range(100)])
    assert acked == list(range(100))
    old = cluster.leader("fail")
    epoch = cluster.partition("fail")["leader_epoch"]
    old.kill(signal.SIGKILL)
    # Served again once a follower is elected (the producer's own deadline bounds the wait).
    offsets = _produce_ok(cluster, "fail", [f"after-{i}" for i in range(10)])
    assert offsets == list(range(100, 110))
    info = cluster.partition("fail")
    assert info["leader"] != old.broker_id and info["leader_epoch"] > epoch
    rows = cluster.any().fetch_all("fail")
    assert [r["value"] for r in rows] == [f"before-{i}" for i in range(100)] + [
        f"after-{i}" for i in range(10)
    ]


def test_controller_failover_and_preferred_leader_return(cluster: Cluster) -> None:
    _create(cluster, "pref", min_insync_replicas=1)
    controller = wait_for("a controller", cluster.controller)
    preferred = cluster.partition("pref")["replicas"][0]
    victim = cluster.brokers[controller]
    victim.kill(signal.SIGKILL)
    wait_for(
        "a new controller",
        lambda: cluster.controller() not in (None, controller),
        timeout=20,
    )
    if preferred == controller:
        wait_for(
            "leader moved", lambda: cluster.partition("pref")["leader"] not in (None, preferred)
        )
    _produce_ok(cluster, "pref", ["while away"])
    victim.start()
    wait_for(
        "preferred leader back",
        lambda: cluster.partition("pref")["leader"] == preferred,
        timeout=40,
    )
    _produce_ok(cluster, "pref", ["back"])


def test_broker_with_empty_disk_catches_up(cluster: Cluster) -> None:
    _create(cluster, "empty", min_insync_replicas=1)
    _produce_ok(cluster, "empty", [f"r{i}" for i in range(200)])
    leader = cluster.leader("empty")
    victim = next(b for b in cluster.brokers.values() if b.broker_id != leader.broker_id)
    victim.kill(signal.SIGKILL)
    shutil.rmtree(victim.data_dir)
    _produce_ok(cluster, "empty", ["while down"])
    victim.start()
    wait_for(
        "rejoined the ISR",
        lambda: victim.broker_id in cluster.partition("empty")["isr"],
        timeout=30,
    )
    wait_for(
        "identical copy",
        lambda: cluster.segment_bytes(victim, "empty") == cluster.segment_bytes(leader, "empty"),
    )
