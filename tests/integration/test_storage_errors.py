"""A log that fails to write goes offline as in Kafka, and heals (issue 12, found 3).

The leader's active segment is made immutable (`chattr +i`: root's writes fail with EPERM, as
on a failing disk). Before, the leader kept leadership and answered KAFKA_STORAGE_ERROR to
every produce until restarted. Now it hands the partition to an in-sync replica and leaves
the ISR, says so in /readyz and /metrics, and once the file is writable again it reopens the
log (recovery repairs the torn write) and rejoins the ISR, without a restart."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for

pytestmark = pytest.mark.skipif(
    shutil.which("chattr") is None, reason="needs chattr (e2fsprogs) to fail a file's writes"
)


@pytest.fixture(scope="module")
def cluster(db_factory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:  # type: ignore[no-untyped-def]
    c = Cluster(db_factory(), tmp_path_factory.mktemp("storage"), 3).start()
    yield c
    c.stop()


def _active_segment(broker: BrokerProcess, topic: str) -> Path:
    return max((broker.data_dir / f"{topic}-0").glob("*.log"))


def _immutable(path: Path, on: bool) -> None:
    subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True)


def _offline_gauge(broker: BrokerProcess) -> float:
    for line in broker.http.get("/metrics").text.splitlines():
        if line.startswith("tierlog_offline_replicas "):
            return float(line.split()[1])
    raise AssertionError("no tierlog_offline_replicas in /metrics")


def test_a_failed_log_hands_leadership_off_and_comes_back(cluster: Cluster) -> None:
    cluster.create_topic("disk", min_insync_replicas=2)
    cluster.produce("disk", [{"value": f"before-{i}"} for i in range(5)])
    old = cluster.leader("disk")
    segment = _active_segment(old, "disk")
    _immutable(segment, True)
    try:
        r = old.http.post(
            "/topics/disk/records", params={"acks": "all"}, json={"records": [{"value": "lost"}]}
        )
        assert r.status_code == 503 and r.json()["error_code"] == "KAFKA_STORAGE_ERROR", r.text
        new = wait_for(
            "another leader",
            lambda: (
                (p := cluster.partition("disk"))["leader"] not in (None, old.broker_id)
                and old.broker_id not in p["isr"]
                and p["leader"]
            ),
            timeout=20,
        )
        ready = old.http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["offline_partitions"] == ["disk-0"]
        assert _offline_gauge(old) == 1
        cluster.produce("disk", [{"value": f"during-{i}"} for i in range(5)], via=new)
        assert "leadership handed off" in old.log_tail(200)
    finally:
        _immutable(segment, False)
    wait_for("the ISR whole again", lambda: len(cluster.partition("disk")["isr"]) == 3, timeout=30)
    assert "offline_partitions" not in old.http.get("/readyz").json()
    assert _offline_gauge(old) == 0
    wait_for(
        "the healed replica identical to the leader",
        lambda: (
            cluster.segment_bytes(old, "disk")
            == cluster.segment_bytes(cluster.brokers[new], "disk")
        ),
        timeout=30,
    )
    values = [r["value"] for r in old.fetch_all("disk")]
    assert values == [f"before-{i}" for i in range(5)] + [f"during-{i}" for i in range(5)]
