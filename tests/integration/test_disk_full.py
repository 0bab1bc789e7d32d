"""A full disk is survivable (issue 26 item 5), on real brokers whose data dirs are small file
systems of their own (tests/integration/disk_full.py: a size-limited tmpfs each).

- A leader's disk fills: the produce that meets it is refused (503 KAFKA_STORAGE_ERROR naming
  the full disk), the leader hands the partition to an in-sync replica and leaves the ISR,
  /readyz and `tierlog_offline_replicas_by_reason{reason="disk_full"}` say why, and it keeps
  serving (and leading) the partition it did not write to. Space freed, it heals without a
  restart: its index and log reopen, it rejoins the ISR with a copy identical to the
  leader's, takes writes again, and no refused record is in the log.
- A follower's disk fills: it drops out of the ISR (acks=all produce goes on with the other
  two, min.insync.replicas=2), and catches up once space is freed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for
from tests.integration.disk_full import MountError, fill, free, mount_small, unmount

DISK_MIB = 48


@pytest.fixture(scope="module", name="c")
def cluster(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("disk-full")
    dirs = [root / f"data-{i}" for i in (1, 2, 3)]
    mounted = []
    try:
        for d in dirs:
            mount_small(d, DISK_MIB)
            mounted.append(d)
    except MountError as exc:
        for d in mounted:
            unmount(d)
        pytest.skip(f"no small file system for the brokers' data dirs: {exc}")
    c = Cluster(db_factory(), root, 3)
    try:
        yield c.start(ready_timeout=120)  # a loaded machine starts brokers slowly
    finally:
        c.stop()
        for d in dirs:
            unmount(d)


def _offline_by_reason(b: BrokerProcess, reason: str) -> float:
    prefix = f'tierlog_offline_replicas_by_reason{{reason="{reason}"}} '
    for line in b.http.get("/metrics").text.splitlines():
        if line.startswith(prefix):
            return float(line.split()[1])
    return 0.0


def _values(rows: list[dict[str, Any]]) -> list[str]:
    return [str(r["value"]) for r in rows]


def _in_sync(c: Cluster, topic: str, broker: int, p: int = 0) -> bool:
    return broker in c.partition(topic, p)["isr"]


def _identical(c: Cluster, b: BrokerProcess, topic: str) -> bool:
    return c.segment_bytes(b, topic) == c.segment_bytes(c.leader(topic), topic)


def _fill_until_refused(old: BrokerProcess) -> list[str]:
    """Fill `old`'s disk and produce to it until a write is refused for it; the values that
    were acknowledged meanwhile (a tmpfs page not yet full can still take a small write)."""
    fill(old.data_dir)
    acked: list[str] = []

    def refused() -> bool:
        value = f"while-full-{len(acked)}"
        r = old.http.post(
            "/topics/full/records", params={"acks": "all"}, json={"records": [{"value": value}]}
        )
        if r.status_code == 200:
            acked.append(value)
            return False
        assert r.status_code == 503, r.text
        doc = r.json()
        assert doc["error_code"] == "KAFKA_STORAGE_ERROR" and "disk full" in doc["message"], doc
        return True

    wait_for("a produce refused for the full disk", refused, timeout=30)
    return acked


def test_a_full_disk_on_a_leader_hands_off_serves_what_it_can_and_heals(c: Cluster) -> None:
    c.create_topic("full", min_insync_replicas=2)
    c.create_topic("steady", partitions=3)
    before = [f"before-{i}" for i in range(5)]
    c.produce("full", [{"value": v} for v in before])
    old = c.leader("full")
    # A partition the same broker leads and nobody writes to while its disk is full.
    steady = next(p for p in range(3) if c.partition("steady", p)["leader"] == old.broker_id)
    c.produce("steady", [{"value": f"steady-{i}"} for i in range(3)], partition=steady)
    try:
        acked_while_full = _fill_until_refused(old)
        new = wait_for(
            "another leader, and the full broker out of the ISR",
            lambda: (
                (p := c.partition("full"))["leader"] not in (None, old.broker_id)
                and old.broker_id not in p["isr"]
                and p["leader"]
            ),
        )
        ready = old.http.get("/readyz")
        assert ready.status_code == 200, ready.text  # it still serves its other partitions
        assert ready.json()["offline_partitions"] == ["full-0"], ready.json()
        assert ready.json()["offline_reasons"]["full-0"].startswith("disk full"), ready.json()
        assert _offline_by_reason(old, "disk_full") == 1
        # What it can read, it serves, and it keeps leading the partition it did not write.
        assert _values(old.fetch_all("steady", steady)) == [f"steady-{i}" for i in range(3)]
        assert c.partition("steady", steady)["leader"] == old.broker_id
        during = [f"during-{i}" for i in range(5)]
        c.produce("full", [{"value": v} for v in during], via=new)
    finally:
        free(old.data_dir)
    # Healed without a restart: back in the ISR, nothing offline, a copy like the leader's.
    wait_for("the healed broker back in the ISR", lambda: _in_sync(c, "full", old.broker_id))
    assert "offline_partitions" not in old.http.get("/readyz").json()
    assert _offline_by_reason(old, "disk_full") == 0
    wait_for("the healed copy identical to the leader's", lambda: _identical(c, old, "full"))
    # Every acknowledged record, in order, and none of the refused ones (never half-written).
    assert _values(c.leader("full").fetch_all("full")) == before + acked_while_full + during
    # Its index takes writes again: the partition it leads is writable.
    c.produce("steady", [{"value": "after"}], partition=steady, via=old.broker_id)
    assert _values(old.fetch_all("steady", steady))[-1] == "after"


def test_a_full_disk_on_a_follower_drops_it_from_the_isr_until_space_returns(
    c: Cluster,
) -> None:
    c.create_topic("ffull", min_insync_replicas=2)
    c.produce("ffull", [{"value": f"a-{i}"} for i in range(5)])
    leader = c.leader("ffull")
    follower = next(b for b in c.brokers.values() if b is not leader)
    fill(follower.data_dir)
    want = [f"a-{i}" for i in range(5)]
    try:
        # acks=all goes on: the follower that cannot append drops out, two stay in sync. (A
        # few small appends may still fit in the last pages of its files: write until then.)
        def dropped_out() -> bool:
            batch = [f"b-{len(want) + i}-" + "x" * 1000 for i in range(5)]
            c.produce("ffull", [{"value": v} for v in batch])
            want.extend(batch)
            return not _in_sync(c, "ffull", follower.broker_id)

        wait_for("the full follower out of the ISR", dropped_out, timeout=60)
        c.produce("ffull", [{"value": f"c-{i}"} for i in range(5)])
        want += [f"c-{i}" for i in range(5)]
        reasons = follower.http.get("/readyz").json().get("offline_reasons", {})
        assert reasons.get("ffull-0", "").startswith("disk full"), reasons
    finally:
        free(follower.data_dir)
    wait_for("the follower back in the ISR", lambda: _in_sync(c, "ffull", follower.broker_id))
    wait_for("the follower caught up", lambda: _identical(c, follower, "ffull"))
    assert _values(c.leader("ffull").fetch_all("ffull")) == want
