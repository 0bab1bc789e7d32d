"""Leadership returns to the preferred replica without losing an acknowledged acks=1 record
(issue 12, found 5: 6 acknowledged records were lost in one such move), on real brokers.

What Kafka's acks=1 does lose is not counted: a record the preferred replica took and
acknowledged before it was stopped, which no follower had fetched yet, is gone once another
replica is elected (issue 26: seen once in ~4 loaded suite runs). Its answer may reach the
client only after the resume (the stop can fall between the leader's decision and its socket
write: seen once, `v233`, in a fresh-clone run), so what counts is when the record was *sent*.
Any other loss fails the test: a record sent after the stop. That the resumed leader never
*decides* success after its lease lapsed, for a write it took before the pause, is shown
deterministically where the pause can be placed exactly: tests/harness/test_lease_answers.py."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from typing import NamedTuple

import httpx
import pytest

from tests.integration.cluster import Cluster, wait_for

LEASE_S = 3.0  # tests/integration/cluster.py FAST --lease-ms


@pytest.fixture(scope="module")
def cluster(db_factory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:  # type: ignore[no-untyped-def]
    c = Cluster(db_factory(), tmp_path_factory.mktemp("preferred"), 3).start()
    yield c
    c.stop()


class Ack(NamedTuple):
    value: str
    sent: float  # time.monotonic() when the request was sent


class Acks1Producer(threading.Thread):
    """Plain acks=1 writes, one record a request, through a broker that stays up (it forwards
    to whichever broker leads): what was acknowledged is recorded."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.stop = url, threading.Event()
        self.acked: list[Ack] = []
        self.refused = 0

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as http:
            i = 0
            while not self.stop.is_set():
                value = f"v{i}"
                i += 1
                sent = time.monotonic()
                try:
                    r = http.post(
                        "/topics/pref/records",
                        params={"acks": "1"},
                        json={"records": [{"value": value, "partition": 0}]},
                    )
                except httpx.HTTPError:
                    self.refused += 1
                    continue
                if r.status_code == 200 and "error_code" not in r.json()["offsets"][0]:
                    self.acked.append(Ack(value, sent))
                else:
                    self.refused += 1
                    time.sleep(0.02)


def test_move_back_to_the_preferred_replica_loses_no_acks_1_record(cluster: Cluster) -> None:
    cluster.create_topic("pref", min_insync_replicas=1)
    preferred = cluster.brokers[cluster.partition("pref")["replicas"][0]]
    assert cluster.partition("pref")["leader"] == preferred.broker_id
    steady = cluster.any(exclude=preferred.broker_id)
    producer = Acks1Producer(steady.url)
    producer.start()
    try:
        time.sleep(1)
        preferred.kill(signal.SIGSTOP)  # past its lease: another replica is elected
        stopped = time.monotonic()
        wait_for(
            "another leader",
            lambda: (
                cluster.describe("pref", via=steady)["partitions"][0]["leader"]
                not in (None, preferred.broker_id)
            ),
            timeout=30,
        )
        time.sleep(1)
        preferred.kill(signal.SIGCONT)
        epoch = cluster.partition("pref")["leader_epoch"]
        wait_for(
            "leadership back on the preferred replica",
            lambda: (
                (p := cluster.partition("pref"))["leader"] == preferred.broker_id
                and p["leader_epoch"] > epoch
            ),
            timeout=40,
        )
        back = time.monotonic()
        time.sleep(1)  # and writes flow again through the new leader
    finally:
        producer.stop.set()
        producer.join(15)
    # Writes acknowledged on both sides of the two moves (a count, > 100, once failed on a
    # loaded machine that acknowledged 94 in the same time).
    sides = (
        sum(a.sent < stopped for a in producer.acked),
        sum(a.sent > back for a in producer.acked),
    )
    assert all(sides), (sides, len(producer.acked), producer.refused)
    wait_for(
        "everything written committed",
        lambda: (p := cluster.partition("pref"))["high_watermark"] == p["log_end_offset"],
    )
    values = {r["value"] for r in preferred.fetch_all("pref")}
    # Taken by the preferred replica before it stopped (sent before the stop; the answer may
    # come after the resume, see the docstring): Kafka's acks=1 loses those no follower had
    # fetched yet across the failover, which is the tail of them, cut where the elected
    # replica's log ended.
    before = [a for a in producer.acked if a.sent < stopped]
    kept = [a.value in values for a in before]
    held = len(kept) - kept[::-1].index(True) if True in kept else 0  # to the last one kept
    assert all(kept[:held]), f"a hole in what was acknowledged before the stop: {kept}"
    lost = [a.value for a in producer.acked if a not in before and a.value not in values]
    assert lost == [], f"{len(lost)} acknowledged acks=1 records lost: {lost[:10]}"
    assert "leadership moved back to the preferred replica" in "".join(
        b.log_tail(2000) for b in cluster.brokers.values()
    )
