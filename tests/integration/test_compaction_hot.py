"""The brokers' log cleaner (hot key compaction) with real broker processes: every replica
compacts its own sealed segments, consumers from offset 0 read the latest value per key with
offsets preserved, idempotent retries still deduplicate, a crash leftover is recovered, and
remote-storage topics are cleaned only below the tiered end."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from ingest.log.segment_swap import cleaned_path
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for
from tests.integration.test_tiering_broker import _create, _files, _registered, _tier


@pytest.fixture
def cluster(fresh_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    monkeypatch.setenv("TIERLOG_CLEANER_INTERVAL_MS", "200")
    c = Cluster(fresh_db, tmp_path, 2).start()
    yield c
    c.stop()


COMPACT = {
    "cleanup_policy": "compact",
    "segment_bytes": 4096,
    "min_cleanable_dirty_ratio": "0.01",
    "delete_retention_ms": 60_000,
}


def _updates(c: Cluster, topic: str, rounds: int, keys: int, ts: int | None = None) -> None:
    """`rounds` requests (one frame each, about a segment each) updating every key."""
    for r in range(rounds):
        recs: list[dict[str, Any]] = [
            {"key": f"k{k}", "value": f"r{r}-" + "x" * 400, "partition": 0} for k in range(keys)
        ]
        if ts is not None:
            for rec in recs:
                rec["timestamp"] = ts
        c.produce(topic, recs)


def _latest(records: list[dict[str, Any]]) -> dict[str, tuple[int, Any]]:
    out: dict[str, tuple[int, Any]] = {}
    for r in records:
        out[r["key"]] = (r["offset"], r["value"])
    return out


def _sizes(b: BrokerProcess, topic: str) -> dict[int, int]:
    """Segment sizes by base offset, listed again if the cleaner swaps a segment between the
    listing and the stat."""
    for _ in range(100):
        try:
            return {base: f.stat().st_size for base, f in _files(b, topic).items()}
        except FileNotFoundError:
            time.sleep(0.05)
    raise AssertionError(f"the segments of {topic} kept changing")


def _compacted(b: BrokerProcess, topic: str, max_bytes: int) -> bool:
    return sum(_sizes(b, topic).values()) <= max_bytes


def test_replicas_compact_and_consumers_read_the_latest_per_key(cluster: Cluster) -> None:
    _create(cluster, "hot", rf=2, remote_storage_enable="false", **COMPACT)
    bad = cluster.any().http.post("/topics/hot/records", json={"records": [{"value": "v"}]})
    assert bad.status_code == 400 and bad.json()["error_code"] == "INVALID_RECORD"
    pid = cluster.any().http.post("/producers").json()["producer_id"]
    idem = {"key": "idem", "value": "once", "partition": 0}
    heads = {
        "X-Tierlog-Producer-Id": str(pid),
        "X-Tierlog-Producer-Epoch": "0",
        "X-Tierlog-Sequence": "0",
    }
    leader = cluster.leader("hot")
    first = leader.http.post("/topics/hot/records", json={"records": [idem]}, headers=heads)
    assert first.status_code == 200, first.text
    _updates(cluster, "hot", 30, keys=8)
    old = int(time.time() * 1000) - 3_600_000
    cluster.produce("hot", [{"key": "k0", "value": None, "timestamp": old}])
    # The cleaner may already be at work (a loaded machine): `full` can be partly compacted,
    # which keeps the latest per key; the produced count is the end offset, not len(full).
    full = cluster.any().fetch_all("hot")
    end = full[-1]["offset"] + 1  # the tombstone, in the active segment
    assert end == 1 + 30 * 8 + 1
    want = _latest(full)
    want.pop("k0", None)  # its tombstone is an hour older than delete.retention.ms
    _updates(cluster, "hot", 2, keys=1)  # roll past the tombstone; k0 updated again after
    want.update(_latest(cluster.any().fetch_all("hot", offset=end)))
    for b in cluster.brokers.values():  # every replica cleans its own disk
        # ~130 KB produced; what is left depends on how the segments rolled (25.6 KB seen)
        wait_for("compacted", lambda b=b: _compacted(b, "hot", 32_000))
    got = cluster.any().fetch_all("hot")
    offsets = [r["offset"] for r in got]
    assert offsets == sorted(set(offsets)) and len(got) < end // 3
    assert _latest(got) == want
    # the idempotent retry of the first batch is still a duplicate (same offset)
    again = leader.http.post("/topics/hot/records", json={"records": [idem]}, headers=heads)
    assert again.json() == first.json()
    # the follower holds the same compacted view: make it the leader and read again
    leader.stop()
    wait_for("new leader", lambda: cluster.partition("hot")["leader"] != leader.broker_id)
    other = cluster.leader("hot")
    assert _latest(other.fetch_all("hot")) == want
    assert (
        other.http.post("/topics/hot/records", json={"records": [idem]}, headers=heads).json()
        == first.json()
    )
    metrics = other.http.get("/metrics").text
    assert "tierlog_log_cleaner_bytes_reclaimed_total" in metrics


def _contents(path: Path) -> bytes:
    """The file's bytes; none if it went meanwhile (a cleaning pass renames its files)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def test_crash_leftovers_are_recovered(cluster: Cluster) -> None:
    _create(cluster, "crash", rf=1, remote_storage_enable="false", **COMPACT)
    _updates(cluster, "crash", 20, keys=4)
    b = cluster.leader("crash")
    wait_for("compacted", lambda: _compacted(b, "crash", 20_000))  # ~70 KB produced
    want = _latest(b.fetch_all("crash"))
    b.kill()  # kill -9 with a half-written cleaned segment on disk
    d = b.data_dir / "crash-0"
    base = min(_files(b, "crash"))
    Path(cleaned_path(str(d), base)).write_bytes(b"TLF1 torn")
    b.start()
    url = "/topics/crash/partitions/0/records"
    wait_for("readable", lambda: b.http.get(url).status_code == 200)
    # Loading dropped the torn file before the partition served a read; a cleaning pass begun
    # since the restart may be writing a .cleaned file of its own (named for the same base).
    leftovers = [d / n for n in os.listdir(d) if n.endswith((".cleaned", ".swap"))]
    assert not [p for p in leftovers if _contents(p) == b"TLF1 torn"]
    assert _latest(b.fetch_all("crash")) == want


def test_tiered_topics_are_cleaned_only_below_the_tiered_end(
    cluster: Cluster, engine: Engine
) -> None:
    topic_id = _create(cluster, "tiered", rf=1, **COMPACT)
    _updates(cluster, "tiered", 12, keys=4)
    b = cluster.leader("tiered")
    sizes = _sizes(b, "tiered")
    wait_for("registered", lambda: len(_registered(engine, topic_id)) >= 10)
    time.sleep(1)  # cleaner passes run: nothing is tiered yet, so nothing changes
    assert _sizes(b, "tiered") == sizes
    end = _tier(engine, topic_id, 6)
    # below the tiered end the files shrink (or merge); above it they stay byte for byte
    wait_for(
        "cleaned below the tiered end",
        lambda: (
            sum(size for base, size in _sizes(b, "tiered").items() if base < end)
            < sum(s for base, s in sizes.items() if base < end)
        ),
    )
    after = _sizes(b, "tiered")
    assert {k: v for k, v in after.items() if k >= end} == {
        k: v for k, v in sizes.items() if k >= end and k in after
    }
    got = b.fetch_all("tiered")
    assert [r["offset"] for r in got if r["offset"] >= end] == list(range(end, 12 * 4))
