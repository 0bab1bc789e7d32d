"""Replication health metrics with Kafka's names (issue 18 item 9), on three real broker
processes: a broker killed and brought back moves UnderReplicatedPartitions,
UnderMinIsrPartitionCount, OfflinePartitionsCount, IsrShrinks/IsrExpands and leader elections
as Kafka's do; the Grafana dashboard in infra/ names only metrics that /metrics serves."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for

DASHBOARD = Path(__file__).parents[2] / "infra" / "grafana" / "tierlog-replication.json"


@pytest.fixture(scope="module")
def cluster(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Shared: the dashboard test only reads; the kill test, which disturbs, comes last."""
    c = Cluster(db_factory(), tmp_path_factory.mktemp("health"), 3).start()
    yield c
    c.stop()


def samples(broker: BrokerProcess) -> dict[str, float]:
    """Every sample of the broker's /metrics, by name, summed over labels."""
    r = broker.http.get("/metrics")
    assert r.status_code == 200, r.text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def total(cluster: Cluster, name: str) -> float:
    """`name` summed over the live brokers, as a dashboard's sum() sees it."""
    return sum(samples(b).get(name, 0.0) for b in cluster.alive())


def every_partition(cluster: Cluster) -> list[dict[str, Any]]:
    topics = cluster.any().http.get("/topics").json()["topics"]
    return [p for t in topics for p in cluster.describe(t["name"])["partitions"]]


def dashboard_metrics() -> set[str]:
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    return {name for e in exprs for name in re.findall(r"\btierlog_[a-z_]+", e)}


def test_dashboard_names_only_served_metrics(cluster: Cluster) -> None:
    cluster.create_topic("served", partitions=1)
    cluster.produce("served", [{"value": "x"}])
    served = set().union(*(samples(b) for b in cluster.alive()))
    named = dashboard_metrics()
    assert {"tierlog_under_replicated_partitions", "tierlog_isr_shrinks_total"} <= named
    assert named <= served, named - served
    wait_for(  # the first look comes a controller tick after the start
        "one active controller",
        lambda: total(cluster, "tierlog_active_controller_count") == 1 or None,
    )


def test_a_killed_broker_moves_the_health_metrics(cluster: Cluster) -> None:
    # min.insync.replicas 3: with one broker gone, every partition is under its min ISR.
    cluster.create_topic("health", partitions=3, rf=3, min_insync_replicas=3)
    cluster.create_topic("solo", partitions=3, rf=1)
    assert total(cluster, "tierlog_under_replicated_partitions") == 0
    assert total(cluster, "tierlog_offline_partitions_count") == 0
    controller = wait_for("a controller", cluster.controller)
    victim = next(b for b in cluster.alive() if b.broker_id != controller)
    mine = [p for p in every_partition(cluster) if victim.broker_id in p["replicas"]]
    replicated = [p for p in mine if len(p["replicas"]) > 1]  # the earlier test's topic too
    solo = [p for p in mine if len(p["replicas"]) == 1]
    led = [p for p in replicated if p["leader"] == victim.broker_id]
    assert led and solo, "replica placement spreads leaders over the brokers"
    before = total(cluster, "tierlog_leader_elections_total")

    victim.kill()
    wait_for(
        "replicated partitions under-replicated, health's under its min ISR",
        lambda: (
            total(cluster, "tierlog_under_replicated_partitions") == len(replicated)
            and total(cluster, "tierlog_under_min_isr_partitions") == 3
        ),
    )
    wait_for(
        "the victim's RF-1 partitions offline",
        lambda: total(cluster, "tierlog_offline_partitions_count") == len(solo),
    )
    assert total(cluster, "tierlog_leader_elections_total") >= before + len(led)
    # The partitions it did not lead: the controller fenced it out of their ISR.
    assert total(cluster, "tierlog_isr_shrinks_total") >= len(replicated) - len(led)
    wait_for(  # the first look comes a controller tick after the start
        "one active controller",
        lambda: total(cluster, "tierlog_active_controller_count") == 1 or None,
    )

    expands = total(cluster, "tierlog_isr_expands_total")
    victim.start()
    wait_for(
        "the victim back in every ISR",
        lambda: (
            total(cluster, "tierlog_under_replicated_partitions") == 0
            and total(cluster, "tierlog_under_min_isr_partitions") == 0
            and total(cluster, "tierlog_offline_partitions_count") == 0
        ),
    )
    # Leaders other than the restarted broker counted its return (a restart zeroes its own).
    others = [b for b in cluster.alive() if b is not victim]
    assert sum(samples(b)["tierlog_isr_expands_total"] for b in others) >= expands + 1
