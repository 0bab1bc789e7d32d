"""The broker's side of tiering, on real broker processes and a real Postgres: sealed segment
registration (leader only, up to the high watermark), the segment download endpoint, local
retention bounded by what is tiered, and describe's hot/cold ranges and lag.

The tiering worker is simulated by writing the manifest with SegmentRegistry/ColdManifest.
"""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine

from cluster.internal_http import CLUSTER_TOKEN_HEADER
from metadata.db import make_engine
from metadata.partition_state import PartitionStateRepo
from metadata.segment_registry import FileSpec, HotSegment, SegmentRegistry
from metadata.types import TopicIdPartition
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for

HOUR_MS = 3600 * 1000
# Registration and local retention run every 250 ms (1 s by default): the waits for them,
# and the waits proving they leave something alone, take a quarter as long.
DUTY_MS = 250
DUTY = ["--tiering-duty-ms", str(DUTY_MS)]
TICKS_S = 4 * DUTY_MS / 1000  # four passes of each


@pytest.fixture(scope="module")
def cluster_db(db_factory: Callable[..., str]) -> str:
    return db_factory()


@pytest.fixture(scope="module")
def engine(cluster_db: str) -> Iterator[Engine]:
    """On the shared cluster's database (the conftest's `engine` is on a per-test one)."""
    e = make_engine(cluster_db)
    yield e
    e.dispose()


@pytest.fixture(scope="module")
def cluster(cluster_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One three-broker cluster for the module's tests, each on its own topic (a cluster
    start takes seconds); the last test kills a leader."""
    c = Cluster(cluster_db, tmp_path_factory.mktemp("cluster"), 3, DUTY).start()
    yield c
    c.stop()


def _create(c: Cluster, name: str, rf: int = 3, **configs: object) -> str:
    r = c.any().http.post(
        "/topics",
        json={
            "name": name,
            "partitions": 1,
            "replication_factor": rf,
            "configs": {k.replace("_", "."): v for k, v in configs.items()},
        },
    )
    assert r.status_code == 201, r.text
    wait_for("replicas ready", lambda: len(c.partition(name)["isr"]) == rf)
    return str(r.json()["id"])


def _produce_frames(c: Cluster, topic: str, frames: int, ts: int | None = None) -> None:
    """One request per frame: with segment.bytes=1024 each frame fills a segment of its own."""
    for i in range(frames):
        rec: dict[str, Any] = {"key": f"k{i}", "value": "x" * 300 + str(i), "partition": 0}
        if ts is not None:
            rec["timestamp"] = ts
        c.produce(topic, [rec, {**rec, "key": f"j{i}"}])


def _files(b: BrokerProcess, topic: str) -> dict[int, Path]:
    d = b.data_dir / f"{topic}-0"
    return {int(f.stem): f for f in sorted(d.glob("*.log"))}


def _hot_bytes(b: BrokerProcess, topic: str) -> int:
    total = 0
    for f in _files(b, topic).values():
        with contextlib.suppress(FileNotFoundError):  # retention may delete it meanwhile
            total += f.stat().st_size
    return total


def _metric(b: BrokerProcess, name: str, **labels: str) -> float | None:
    text = b.http.get("/metrics").text
    for line in text.splitlines():
        m = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if m and all(f'{k}="{v}"' in m.group(1) for k, v in labels.items()):
            return float(m.group(2))
    return None


def _registered(engine: Engine, topic_id: str) -> list[HotSegment]:
    return SegmentRegistry(engine).segments(TopicIdPartition(topic_id, 0))


def _registered_n(engine: Engine, topic_id: str, n: int) -> list[HotSegment] | None:
    segs = _registered(engine, topic_id)
    return segs if len(segs) == n else None


def _partition_if(
    c: Cluster, topic: str, field: str, value: object = None
) -> dict[str, Any] | None:
    """The partition's description once `field` is truthy (or equals `value` if given)."""
    p = c.partition(topic)
    return p if (p[field] if value is None else p[field] == value) else None


def _files_are(b: BrokerProcess, topic: str, bases: list[int]) -> bool:
    return sorted(_files(b, topic)) == bases


def _metric_is(b: BrokerProcess, name: str, value: float, **labels: str) -> bool:
    return _metric(b, name, **labels) == value


def _metric_if(b: BrokerProcess, name: str, at_most: float, **labels: str) -> float | None:
    value = _metric(b, name, **labels)
    return value if value is not None and 0 < value <= at_most else None


def _tier(engine: Engine, topic_id: str, count: int) -> int:
    """Simulate the worker: tier the lowest `count` untiered segments; the new tiered end."""
    reg = SegmentRegistry(engine)
    end = -1
    for _ in range(count):
        claimed = reg.claim("sim-worker", 60_000, 100)
        for other in claimed:
            if other.topic_id != topic_id:
                reg.release(other)
        claims = [c for c in claimed if c.topic_id == topic_id]
        assert len(claims) == 1, claims  # one partition: only its lowest segment is claimable
        claim = claims[0]
        spec = FileSpec(f"sim/{topic_id}/{claim.base_offset}.parquet", claim.size_bytes, 2, 0, 0)
        reg.mark_tiered(claim, spec, claim.base_offset)
        end = claim.end_offset
    return end


def _token(engine: Engine) -> str:
    return PartitionStateRepo(engine).cluster_secret()


def test_leader_registers_sealed_segments_and_any_replica_serves_them(
    cluster: Cluster, engine: Engine
) -> None:
    topic_id = _create(cluster, "reg", segment_bytes=1024)
    _produce_frames(cluster, "reg", 6)
    leader = cluster.leader("reg")
    files = _files(leader, "reg")
    assert len(files) >= 6  # one frame per segment, plus the active one
    hw = cluster.partition("reg")["high_watermark"]
    segs = wait_for(
        "sealed segments registered",
        lambda: _registered_n(engine, topic_id, len(files) - 1),
    )
    bases = sorted(files)
    for seg, base, nxt in zip(segs, bases, bases[1:], strict=False):
        assert (seg.base_offset, seg.end_offset) == (base, nxt)
        assert seg.size_bytes == files[base].stat().st_size and seg.end_offset <= hw
    assert max(s.end_offset for s in segs) == bases[-1]  # the active segment is not registered
    # Only the leader registers.
    for b in cluster.brokers.values():
        n = _metric(b, "tierlog_segments_registered_total", topic="reg")
        assert (n or 0) == (len(segs) if b is leader else 0), (b.broker_id, n)

    token = {CLUSTER_TOKEN_HEADER: _token(engine)}
    first = segs[1]
    path = f"/internal/topics/reg/partitions/0/segments/{first.base_offset}"
    expected = files[first.base_offset].read_bytes()
    for b in cluster.brokers.values():  # leader and followers alike

        def served(b: BrokerProcess = b) -> httpx.Response | None:
            r = b.http.get(path, headers=token)
            return r if r.status_code == 200 else None  # a follower's HW may trail briefly

        r = wait_for("segment served", served)
        assert r.content == expected
        assert r.headers["x-tierlog-end-offset"] == str(first.end_offset)
        r = b.http.get(path, params={"end_offset": first.end_offset}, headers=token)
        assert r.status_code == 200 and r.content == expected
    b = cluster.any()
    assert b.http.get(path).status_code == 403
    r = b.http.get(path, headers={CLUSTER_TOKEN_HEADER: "nope"})
    assert r.status_code == 403 and r.json()["error_code"] == "CLUSTER_AUTHORIZATION_FAILED"
    active = bases[-1]
    for missing in (
        f"/internal/topics/reg/partitions/0/segments/{first.base_offset + 1}",
        f"/internal/topics/reg/partitions/0/segments/{active}",  # not sealed
        f"{path}?end_offset={first.end_offset + 1}",
    ):
        r = b.http.get(missing, headers=token)
        assert r.status_code == 404 and r.json()["error_code"] == "NOT_FOUND", r.text
    r = b.http.get("/internal/topics/nope/partitions/0/segments/0", headers=token)
    assert r.status_code == 404 and r.json()["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_registration_stops_at_the_high_watermark(fresh_db: str, tmp_path: Path) -> None:
    # Long leases and lag limits: paused followers stay in the ISR and hold the HW back.
    slow = ["--lease-ms", "60000", "--replica-lag-ms", "60000", *DUTY]
    c = Cluster(fresh_db, tmp_path, 2, slow).start()
    engine = make_engine(fresh_db)
    try:
        topic_id = _create(c, "hw", rf=2, segment_bytes=1024)
        _produce_frames(c, "hw", 3)
        leader = c.leader("hw")
        sealed = len(_files(leader, "hw")) - 1
        assert sealed >= 2
        wait_for("first segments registered", lambda: len(_registered(engine, topic_id)) == sealed)
        follower = c.any(exclude=leader.broker_id)
        follower.kill(signal.SIGSTOP)
        try:
            for i in range(3):
                leader.produce("hw", [{"value": "y" * 300 + str(i), "partition": 0}], acks="1")
            p = leader.http.get("/topics/hw").json()["partitions"][0]
            hw, leo = p["high_watermark"], p["log_end_offset"]
            assert leo > hw
            sealed_above = [b for b in _files(leader, "hw") if b > hw]
            assert sealed_above  # segments beyond the HW exist on the leader's disk
            time.sleep(TICKS_S)  # several registration passes
            segs = _registered(engine, topic_id)
            assert all(s.end_offset <= hw for s in segs), (segs, hw)
        finally:
            follower.kill(signal.SIGCONT)
        leo_files = sorted(_files(leader, "hw"))
        wait_for(
            "the rest registered once committed",
            lambda: len(_registered(engine, topic_id)) == len(leo_files) - 1,
        )
    finally:
        engine.dispose()
        c.stop()


def test_local_retention_deletes_only_tiered_segments(cluster: Cluster, engine: Engine) -> None:
    old = int(time.time() * 1000) - HOUR_MS
    topic_id = _create(cluster, "lr", segment_bytes=1024, local_retention_ms=60_000)
    _produce_frames(cluster, "lr", 6, ts=old)  # all due for local deletion at once
    leader = cluster.leader("lr")
    bases = sorted(_files(leader, "lr"))
    wait_for("registered", lambda: len(_registered(engine, topic_id)) == len(bases) - 1)
    # Nothing tiered yet: nothing deleted, and retention says it is blocked.
    for b in cluster.brokers.values():
        wait_for(
            "blocked gauge",
            partial(_metric_if, b, "tierlog_local_retention_blocked_bytes", 1e12, topic="lr"),
        )
        assert sorted(_files(b, "lr")) == bases
    wait_for(
        "a blocked warning",
        lambda: "local retention blocked" in leader.log_path.read_text(errors="replace"),
    )
    p = cluster.partition("lr")
    assert p["cold"] is None and p["hot"] == {"start": 0, "end": p["log_end_offset"]}
    assert p["tiering_lag"] == p["high_watermark"]
    # The leader's byte figures, through every node (the others ask the leader).
    sizes = {base: f.stat().st_size for base, f in _files(leader, "lr").items()}
    for b in cluster.brokers.values():
        d = b.http.get("/topics/lr").json()["partitions"][0]
        assert d["hot_bytes"] == sum(sizes.values()) and d["cold_bytes"] == 0
        assert d["tiering_lag_bytes"] == sum(sizes[x] for x in bases[:-1])
        assert d["tiering_lag_seconds"] > 0

    # Tier the first three: exactly those go, from every replica; the rest stay.
    tiered_end = _tier(engine, topic_id, 3)
    assert tiered_end == bases[3]
    for b in cluster.brokers.values():
        wait_for("tiered segments deleted", partial(_files_are, b, "lr", bases[3:]))
        deleted = _metric(b, "tierlog_local_retention_deleted_segments_total", topic="lr")
        assert deleted == 3
        blocked = _metric(b, "tierlog_local_retention_blocked_bytes", topic="lr")
        assert blocked == sum(_files(b, "lr")[x].stat().st_size for x in bases[3:-1])
    p = wait_for("describe shows tiers", lambda: _partition_if(cluster, "lr", "cold"))
    hw = p["high_watermark"]
    assert p["cold"] == {"start": 0, "end": tiered_end}
    assert p["hot"] == {"start": tiered_end, "end": p["log_end_offset"]}
    assert p["log_start_offset"] == 0 and p["tiering_lag"] == hw - tiered_end
    assert p["cold_bytes"] == sum(sizes[x] for x in bases[:3])
    assert p["tiering_lag_bytes"] == sum(sizes[x] for x in bases[3:-1])
    lag = wait_for(
        "lag metric", lambda: _metric(leader, "tierlog_partition_tiering_lag_records", topic="lr")
    )
    assert lag == hw - tiered_end
    # A fetch below the hot start says the offset is in the cold tier.
    for b in cluster.brokers.values():
        r = b.http.get("/topics/lr/partitions/0/records", params={"offset": 1})
        assert r.status_code == 416, r.text
        doc = r.json()
        assert "cold" in doc["message"] and f"[0, {tiered_end})" in doc["message"]
        assert doc["cold"] == {"start": 0, "end": tiered_end}
    assert cluster.any().fetch("lr", offset=tiered_end)["records"][0]["offset"] == tiered_end

    # Tier everything sealed: all of it goes; the active segment always stays.
    _tier(engine, topic_id, len(bases) - 4)
    for b in cluster.brokers.values():
        wait_for("all tiered deleted", partial(_files_are, b, "lr", bases[-1:]))
        wait_for(
            "not blocked",
            partial(_metric_is, b, "tierlog_local_retention_blocked_bytes", 0, topic="lr"),
        )
    p = wait_for("lag", lambda: _partition_if(cluster, "lr", "tiering_lag", 2))
    assert p["hot"]["start"] == bases[-1] and p["cold"] == {"start": 0, "end": bases[-1]}


def test_local_retention_by_bytes_keeps_untiered(cluster: Cluster, engine: Engine) -> None:
    topic_id = _create(
        cluster, "lb", segment_bytes=1024, retention_bytes=-1, local_retention_bytes=2000
    )
    _produce_frames(cluster, "lb", 6)  # current timestamps: only the size bound applies
    leader = cluster.leader("lb")
    files = _files(leader, "lb")
    bases = sorted(files)
    wait_for("registered", lambda: len(_registered(engine, topic_id)) == len(bases) - 1)
    for b in cluster.brokers.values():  # a retention pass found the bytes over the bound
        wait_for(
            "blocked gauge",
            partial(_metric_if, b, "tierlog_local_retention_blocked_bytes", 1e12, topic="lb"),
        )
    time.sleep(TICKS_S)  # and more passes
    assert sorted(_files(leader, "lb")) == bases  # over the bound, but nothing is tiered
    _tier(engine, topic_id, 2)
    for b in cluster.brokers.values():
        wait_for("two deleted", partial(_files_are, b, "lb", bases[2:]))
    _tier(engine, topic_id, len(bases) - 3)

    def under_bound(b: BrokerProcess) -> bool:
        return _hot_bytes(b, "lb") <= 2000 and bases[-1] in _files(b, "lb")

    for b in cluster.brokers.values():
        wait_for("hot bytes under local.retention.bytes", partial(under_bound, b))
        hot = wait_for(
            "hot bytes metric",
            partial(_metric_if, b, "tierlog_hot_bytes", 2000, topic="lb"),
        )
        assert hot == _hot_bytes(b, "lb")


def test_remote_storage_disabled_topic_is_never_registered(
    cluster: Cluster, engine: Engine
) -> None:
    topic_id = _create(cluster, "off", segment_bytes=1024, remote_storage_enable="false")
    _produce_frames(cluster, "off", 4)
    time.sleep(TICKS_S)  # several registration passes
    assert _registered(engine, topic_id) == []
    p = cluster.partition("off")
    assert p["tiering_lag"] == 0 and p["cold"] is None
    assert p["log_start_offset"] == p["hot"]["start"] == 0


def test_download_endpoint_needs_no_leader(cluster: Cluster, engine: Engine) -> None:
    """A follower keeps serving its committed sealed segments while the leader is down."""
    topic_id = _create(cluster, "dl", segment_bytes=1024, min_insync_replicas=1)
    _produce_frames(cluster, "dl", 3)
    segs = wait_for("registered", lambda: _registered(engine, topic_id))
    leader = cluster.leader("dl")
    expected = _files(leader, "dl")[segs[0].base_offset].read_bytes()
    leader.kill()
    follower = cluster.any()
    r = httpx.get(
        f"{follower.url}/internal/topics/dl/partitions/0/segments/{segs[0].base_offset}",
        headers={CLUSTER_TOKEN_HEADER: _token(engine)},
    )
    assert r.status_code == 200 and r.content == expected
