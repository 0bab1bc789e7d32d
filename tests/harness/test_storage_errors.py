"""A log that fails to write goes offline as in Kafka, and heals (issue 12, found 3), in
process.

The leader's active segment is made immutable (`chattr +i`: root's writes fail with EPERM, as
on a failing disk). Before, the leader kept leadership and answered KAFKA_STORAGE_ERROR to
every produce until restarted. Now it hands the partition to an in-sync replica and leaves
the ISR, says so in /readyz and /metrics, and once the file is writable again it reopens the
log (recovery repairs the torn write) and rejoins the ISR, without a restart."""

from __future__ import annotations

import shutil

import pytest

from tests.harness.cluster import InProcessCluster
from tests.harness.node import Node
from tests.integration.cluster import wait_for

pytestmark = pytest.mark.skipif(
    shutil.which("chattr") is None, reason="needs chattr (e2fsprogs) to fail a file's writes"
)


def _offline_gauge(broker: Node) -> float:
    """From the broker's own /metrics: its gauge, not another in-process broker's."""
    for line in broker.http.get("/metrics").text.splitlines():
        if line.startswith("tierlog_offline_replicas "):
            return float(line.split()[1])
    raise AssertionError("no tierlog_offline_replicas in /metrics")


def test_a_failed_log_hands_leadership_off_and_comes_back(cluster: InProcessCluster) -> None:
    c = cluster
    c.create_topic("disk", min_insync_replicas=2)
    c.produce("disk", [{"value": f"before-{i}"} for i in range(5)])
    old = c.leader("disk")
    with c.failing_storage(old, "disk"):
        r = old.http.post(
            "/topics/disk/records", params={"acks": "all"}, json={"records": [{"value": "lost"}]}
        )
        assert r.status_code == 503 and r.json()["error_code"] == "KAFKA_STORAGE_ERROR", r.text
        new = wait_for(
            "another leader",
            lambda: (
                (p := c.partition("disk"))["leader"] not in (None, old.broker_id)
                and old.broker_id not in p["isr"]
                and p["leader"]
            ),
            timeout=20,
        )
        ready = old.http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["offline_partitions"] == ["disk-0"]
        assert _offline_gauge(old) == 1
        c.produce("disk", [{"value": f"during-{i}"} for i in range(5)], via=new)
        assert "leadership handed off" in c.logs.text(old.broker_id)
    # The reopen is retried on a backoff (1 s, doubling) on the broker's clock: let it pass.
    c.advance(2)
    wait_for("the ISR whole again", lambda: len(c.partition("disk")["isr"]) == 3, timeout=30)
    assert "offline_partitions" not in old.http.get("/readyz").json()
    assert _offline_gauge(old) == 0
    wait_for(
        "the healed replica identical to the leader",
        lambda: old.segment_bytes("disk") == c.brokers[new].segment_bytes("disk"),
        timeout=30,
    )
    values = [r["value"] for r in old.fetch_all("disk")]
    assert values == [f"before-{i}" for i in range(5)] + [f"during-{i}" for i in range(5)]
