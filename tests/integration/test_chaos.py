"""Chaos: kill -9 brokers (mostly leaders) under idempotent acks=all producers.

Afterwards every acknowledged record is present exactly once, per-key order holds, and all
replicas hold byte-identical frames up to the high watermark.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from logformat.partitioner import partition_for_key
from tests.integration.cluster import Cluster, wait_for

PARTITIONS = 3
KILLS = 6


@pytest.fixture
def cluster(fresh_db: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(fresh_db, tmp_path, 3).start()
    yield c
    c.stop()


class Producer(threading.Thread):
    """An idempotent producer: each batch is retried, unchanged, until it is acknowledged."""

    def __init__(self, cluster: Cluster, name: str, keys: list[str], stop: threading.Event):
        super().__init__(daemon=True)
        self.cluster, self.name_, self.keys, self.stop = cluster, name, keys, stop
        self.acked: list[tuple[int, int, str, str]] = []  # (partition, offset, key, value)
        self.retries = 0
        self.error: str | None = None

    def run(self) -> None:
        http = httpx.Client(timeout=15)
        pid = self._call(lambda url: http.post(f"{url}/producers"))["producer_id"]
        seq: dict[int, int] = defaultdict(int)
        counter = 0
        rng = random.Random(self.name_)
        while not self.stop.is_set():
            key = rng.choice(self.keys)
            p = partition_for_key(key.encode(), PARTITIONS)
            values = [f"{self.name_}|{key}|{counter + i}" for i in range(rng.randint(1, 5))]
            counter += len(values)
            body = {"records": [{"key": key, "value": v} for v in values]}
            headers = {
                "X-Tierlog-Producer-Id": str(pid),
                "X-Tierlog-Producer-Epoch": "0",
                "X-Tierlog-Sequence": str(seq[p]),
            }
            doc = self._call(
                lambda url, b=body, h=headers: http.post(
                    f"{url}/topics/chaos/records", params={"acks": "all"}, json=b, headers=h
                )
            )
            if doc is None:
                return
            offsets = doc["offsets"]
            assert all(o["partition"] == p for o in offsets)
            self.acked += [(p, o["offset"], key, v) for o, v in zip(offsets, values, strict=True)]
            seq[p] += len(values)

    def _call(self, send):  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            alive = self.cluster.alive()
            if alive:
                try:
                    r = send(random.choice(alive).url)
                    if r.status_code in (200, 201):
                        doc = r.json()
                        if "offsets" not in doc or all("offset" in o for o in doc["offsets"]):
                            return doc
                    elif r.status_code not in (503, 409) or (
                        r.status_code == 409
                        and r.json()["error_code"] != "OUT_OF_ORDER_SEQUENCE_NUMBER"
                    ):
                        self.error = r.text
                        return None
                    elif r.status_code == 409:
                        self.error = r.text  # a gap must never happen with unchanged retries
                        return None
                except httpx.HTTPError:
                    pass
            self.retries += 1
            time.sleep(0.1)
        self.error = "gave up after 120 s of retries"
        return None


def test_kill_9_loop_loses_and_duplicates_nothing(cluster: Cluster) -> None:
    r = cluster.any().http.post(
        "/topics",
        json={
            "name": "chaos",
            "partitions": PARTITIONS,
            "replication_factor": 3,
            "configs": {"min.insync.replicas": 2, "segment.bytes": 64 * 1024},
        },
    )
    assert r.status_code == 201, r.text
    wait_for(
        "full ISRs",
        lambda: all(len(p["isr"]) == 3 for p in cluster.describe("chaos")["partitions"]),
    )
    stop = threading.Event()
    keys = [f"key-{i}" for i in range(24)]
    producers = [Producer(cluster, f"prod{i}", keys[i::3], stop) for i in range(3)]
    for prod in producers:
        prod.start()
    rng = random.Random(7)
    time.sleep(2)
    for kill in range(KILLS):
        if rng.random() < 0.7:
            victim = cluster.leader("chaos", rng.randrange(PARTITIONS))
        else:
            victim = rng.choice(list(cluster.brokers.values()))
        victim.kill(signal.SIGKILL)
        time.sleep(rng.uniform(1.0, 2.5))
        victim.start()
        wait_for(
            f"broker back after kill {kill}",
            lambda: all(b["alive"] for b in cluster.any().http.get("/brokers").json()["brokers"]),
            timeout=30,
        )
        time.sleep(rng.uniform(0.5, 1.5))
    time.sleep(2)
    stop.set()
    for prod in producers:
        prod.join(150)
        assert not prod.is_alive()
        assert prod.error is None, prod.error
    wait_for(
        "full ISRs after chaos",
        lambda: all(len(p["isr"]) == 3 for p in cluster.describe("chaos")["partitions"]),
        timeout=60,
    )

    acked = [a for prod in producers for a in prod.acked]
    assert len(acked) > 300, f"too little traffic to mean anything: {len(acked)}"
    reader = cluster.any()
    for p in range(PARTITIONS):
        rows = reader.fetch_all("chaos", p)
        values = [r["value"] for r in rows]
        assert len(values) == len(set(values)), f"duplicates in partition {p}"
        assert [r["offset"] for r in rows] == list(range(len(rows)))
        by_offset = {r["offset"]: r["value"] for r in rows}
        for part, offset, _key, value in acked:
            if part == p:
                assert by_offset.get(offset) == value, f"acknowledged {value} lost at {p}:{offset}"
        per_key: dict[tuple[str, str], list[int]] = defaultdict(list)
        for v in values:
            name, key, n = v.split("|")
            per_key[(name, key)].append(int(n))
        for seen in per_key.values():
            assert seen == sorted(seen), "per-key order broken"
        hw = cluster.partition("chaos", p)["high_watermark"]
        assert hw == len(rows)
        wait_for(
            f"byte-identical replicas of partition {p}",
            lambda p=p: (
                len({cluster.segment_bytes(b, "chaos", p) for b in cluster.brokers.values()}) == 1
            ),
            timeout=30,
        )
    print(
        f"chaos: {len(acked)} acknowledged records, {sum(x.retries for x in producers)} retries, "
        f"{KILLS} kills"
    )
