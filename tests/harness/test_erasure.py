"""Erasure requests (issue 31) on the in-process 3-broker cluster: the API's answers and its
audit row, and bad input refused with nothing stored or started."""

from __future__ import annotations

import base64
import hmac
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY
from sqlalchemy import func, select

from ingest.cleaner.log_cleaner import segment_frames
from logformat.frame import decode_records
from metadata.erasures import ErasureRepo, erasure_keys, erasures
from metadata.schema import cluster as cluster_table
from tests.harness.cluster import InProcessCluster
from tests.integration.cluster import wait_for


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _rows(c: InProcessCluster) -> tuple[int, int]:
    with c._engine.connect() as conn:
        return (
            conn.execute(select(func.count()).select_from(erasures)).scalar_one(),
            conn.execute(select(func.count()).select_from(erasure_keys)).scalar_one(),
        )


def test_request_is_accepted_listed_and_audited_without_the_keys(
    cluster: InProcessCluster,
) -> None:
    cluster.create_topic("erase-api", partitions=2)
    cluster.produce("erase-api", [{"key": "alice", "value": "v"}] * 3)
    http = cluster.any().http
    binary = bytes([0, 255, 7])
    r = http.post(
        "/topics/erase-api/erasures",
        json={"keys": ["alice", "bob", "alice"], "keys_b64": [base64.b64encode(binary).decode()]},
    )
    assert r.status_code == 202, r.text
    made = r.json()
    assert made["state"] == "pending" and made["keys"] == 3  # distinct keys
    assert made["requested_by"] == "User:ANONYMOUS"
    assert made["end_offsets"] == {"0": 3, "1": 0}  # what exists now is erased
    assert r.headers["location"] == f"/topics/erase-api/erasures/{made['id']}"

    got = http.get(f"/topics/erase-api/erasures/{made['id']}")
    assert got.status_code == 200 and got.json()["id"] == made["id"]
    listed = http.get("/topics/erase-api/erasures").json()["erasures"]
    assert [e["id"] for e in listed] == [made["id"]]

    with cluster._engine.connect() as conn:
        secret = conn.execute(select(cluster_table.c.secret)).scalar_one()
        hashes = conn.execute(
            select(erasures.c.key_hashes).where(erasures.c.id == made["id"])
        ).scalar_one()
    expected = {hmac.digest(secret.encode(), k, "sha256") for k in (b"alice", b"bob", binary)}
    assert {bytes(h) for h in hashes} == expected  # keyed hashes, never the keys


def test_bad_requests_are_refused_and_start_nothing(cluster: InProcessCluster) -> None:
    cluster.create_topic("erase-bad", rf=1)
    cluster.create_topic("erase-other", rf=1)
    http = cluster.any().http
    before = _rows(cluster)
    cases = [
        ("/topics/no-such-topic/erasures", {"keys": ["k"]}, 404),
        ("/topics/erase-bad/erasures", {"keys": []}, 422),
        ("/topics/erase-bad/erasures", {}, 422),
        ("/topics/erase-bad/erasures", {"keys": [f"k{i}" for i in range(10_001)]}, 422),
        ("/topics/erase-bad/erasures", {"keys": ["a"] * 5_001, "keys_b64": ["YQ=="] * 5_000}, 422),
        ("/topics/erase-bad/erasures", {"keys_b64": ["not base64!"]}, 422),
        ("/topics/erase-bad/erasures", {"keys": [1, 2]}, 422),
        ("/topics/erase-bad/erasures", {"keys": "alice"}, 422),
        ("/topics/erase-bad/erasures", {"key": ["alice"]}, 422),
    ]
    for path, body, status in cases:
        r = http.post(path, json=body)
        assert r.status_code == status, (body if len(str(body)) < 80 else path, r.text)
        assert r.json()["message"], r.text  # a reason a person can read
    assert _rows(cluster) == before

    made = http.post("/topics/erase-other/erasures", json={"keys": ["k"]}).json()
    for eid in (made["id"], "not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        r = http.get(f"/topics/erase-bad/erasures/{eid}")
        assert r.status_code == 404, r.text


def _disk_keys(node_dir: Path, topic: str, partition: int) -> list[bytes | None]:
    """Every record key in a replica's segment files, read from the files themselves."""
    keys: list[bytes | None] = []
    for path in sorted((node_dir / f"{topic}-{partition}").glob("*.log")):
        for _, frame in segment_frames(str(path)):
            keys.extend(decode_records(frame).column(2).to_pylist())
    return keys


def _wait_state(c: InProcessCluster, topic: str, eid: str, state: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        doc = dict(c.any().http.get(f"/topics/{topic}/erasures/{eid}").json())
        return doc if doc["state"] == state else None

    return dict(wait_for(f"erasure {eid} {state}", reached, timeout=60))


def test_hot_erasure_on_every_replica(cluster: InProcessCluster) -> None:
    topic = "erase-hot"
    cluster.create_topic(topic, partitions=2, segment_bytes=2048, remote_storage_enable="false")
    for p in (0, 1):
        for i in range(12):  # several sealed segments, and the rest in the active one
            batch = [{"key": f"u{i % 4}", "value": f"v{i}-{j}" * 8} for j in range(3)]
            batch.append({"key": "alice", "value": f"secret-{i}"})
            cluster.produce(topic, batch, partition=p)
    leader = cluster.leader(topic, 0)
    before = {p: leader.fetch_all(topic, p) for p in (0, 1)}
    hw = {p: cluster.partition(topic, p)["high_watermark"] for p in (0, 1)}

    hot_metrics = ("records_removed", "bytes_rewritten", "segments_rewritten")
    counted = {m: _sample(f"tierlog_erasure_hot_{m}_total", topic=topic) for m in hot_metrics}
    made = leader.http.post(f"/topics/{topic}/erasures", json={"keys": ["alice"]}).json()
    done = _wait_state(cluster, topic, made["id"], "done")
    for m in hot_metrics:  # every broker of the in-process cluster counts on one registry
        got = _sample(f"tierlog_erasure_hot_{m}_total", topic=topic) - counted[m]
        assert got == sum(r[m] for r in done["hot"].values()) > 0, m
    states = ErasureRepo(cluster._engine).count_by_state()
    assert states["done"] >= 1
    wait_for(  # the duty's next pass publishes the states Postgres holds
        "erasure request gauges",
        lambda: all(
            _sample("tierlog_erasure_requests", state=s) == n
            for s, n in ErasureRepo(cluster._engine).count_by_state().items()
        ),
    )
    cluster.produce(topic, [{"key": "alice", "value": "after"}], partition=0)  # kept: later

    assert done["finished_at"] and done["cold"] == {}
    assert set(done["hot"]) == {f"{p}/{b}" for p in (0, 1) for b in cluster.brokers}
    assert sum(r["records_removed"] for r in done["hot"].values()) == 3 * 2 * 12
    for p in (0, 1):
        after = cluster.leader(topic, p).fetch_all(topic, p)
        want = [r for r in before[p] if r["key"] != "alice"]
        assert [(r["offset"], r["key"], r["value"]) for r in after if r["offset"] < hw[p]] == [
            (r["offset"], r["key"], r["value"]) for r in want
        ]
        if p == 0:
            assert [r["value"] for r in after if r["key"] == "alice"] == ["after"]
        assert cluster.partition(topic, p)["high_watermark"] == hw[p] + (p == 0)
        copies = {n.segment_bytes(topic, p) for n in cluster.brokers.values()}
        assert len(copies) == 1  # replicas byte-identical
        for n in cluster.brokers.values():
            keys = _disk_keys(n.data_dir, topic, p)
            assert keys.count(b"alice") == (p == 0)  # only the record produced after
    with cluster._engine.connect() as conn:  # the raw keys went with the request
        assert (
            conn.execute(
                select(func.count())
                .select_from(erasure_keys)
                .where(erasure_keys.c.erasure_id == made["id"])
            ).scalar_one()
            == 0
        )


def test_requests_on_a_topic_serialize_and_a_deleted_topic_fails_them(
    cluster: InProcessCluster,
) -> None:
    """A tiered topic's request waits on the cold tier (no compaction worker here): a second
    one stays pending until the first is done; deleting the topic fails what is open."""
    topic = "erase-serial"
    tid = str(cluster.create_topic(topic, segment_bytes=2048)["id"])  # remote.storage.enable
    cluster.produce(topic, [{"key": "alice", "value": "x"}, {"key": "bob", "value": "y"}])
    http = cluster.any().http
    first = http.post(f"/topics/{topic}/erasures", json={"keys": ["alice"]}).json()
    second = http.post(f"/topics/{topic}/erasures", json={"keys": ["bob"]}).json()

    def hot_done() -> bool:
        doc = http.get(f"/topics/{topic}/erasures/{first['id']}").json()
        return doc["state"] == "running" and len(doc["hot"]) == 3

    wait_for("the first request's hot tier", hot_done, timeout=60)
    assert http.get(f"/topics/{topic}/erasures/{second['id']}").json()["state"] == "pending"
    repo = ErasureRepo(cluster._engine)
    repo.record_cold(first["id"], tid, 0, {"done": True, "finished_at_ms": 0})  # as compaction
    _wait_state(cluster, topic, first["id"], "done")
    wait_for(
        "the second request's hot tier",
        lambda: len(http.get(f"/topics/{topic}/erasures/{second['id']}").json()["hot"]) == 3,
        timeout=60,
    )
    assert [r["key"] for r in cluster.leader(topic).fetch_all(topic)] == []

    third = http.post(f"/topics/{topic}/erasures", json={"keys": ["carol"]}).json()
    assert http.request("DELETE", f"/topics/{topic}").status_code == 200
    for eid in (second["id"], third["id"]):
        failed = _wait_state(cluster, topic, eid, "failed")
        assert failed["error"] == "the topic was deleted" and failed["finished_at"]
    with cluster._engine.connect() as conn:  # failed requests' keys went too
        left = select(func.count()).select_from(erasure_keys)
        ids = [second["id"], third["id"]]
        assert conn.execute(left.where(erasure_keys.c.erasure_id.in_(ids))).scalar_one() == 0


def test_a_replica_cut_off_from_postgres_erases_once_it_is_back(cluster: InProcessCluster) -> None:
    """A replica whose duty cannot run (its Postgres cut) holds the request in running; once
    back it runs its pass from the state in Postgres, and the replicas end byte-identical."""
    topic = "erase-resume"
    cluster.create_topic(topic, segment_bytes=2048, remote_storage_enable="false")
    cluster.produce(topic, [{"key": "alice", "value": "x"}, {"key": "bob", "value": "y"}] * 20)
    leader = cluster.leader(topic)
    follower = next(n for n in cluster.brokers.values() if n is not leader)
    cluster.cut_postgres(follower.broker_id)
    try:
        made = leader.http.post(f"/topics/{topic}/erasures", json={"keys": ["alice"]}).json()

        def others_done() -> bool:
            doc = leader.http.get(f"/topics/{topic}/erasures/{made['id']}").json()
            return len(doc["hot"]) == 2

        wait_for("the other replicas' passes", others_done, timeout=60)
        doc = leader.http.get(f"/topics/{topic}/erasures/{made['id']}").json()
        assert doc["state"] == "running" and f"0/{follower.broker_id}" not in doc["hot"]
        assert b"alice" in _disk_keys(follower.data_dir, topic, 0)
    finally:
        cluster.heal()
    done = _wait_state(cluster, topic, made["id"], "done")
    assert f"0/{follower.broker_id}" in done["hot"]
    for n in cluster.brokers.values():
        assert b"alice" not in _disk_keys(n.data_dir, topic, 0)
    assert len({n.segment_bytes(topic) for n in cluster.brokers.values()}) == 1
