"""The replicas after the run: each in-sync follower serves the leader's records (read as a
fetch node reads, Kafka's follower fetching, so every copy is read back and checked), and
every replica's segment files are byte-identical up to the high watermark."""

from __future__ import annotations

import time

from cluster.http.fetch_response import REPLICA_READ_HEADER
from cluster.internal_http import CLUSTER_TOKEN_HEADER
from metadata.db import make_engine
from metadata.partition_state import PartitionStateRepo
from tests.chaos.checker import MAX_REPORTED
from tests.chaos.history import Row
from tests.chaos.workload import TOPIC
from tests.integration.cluster import Cluster, wait_for

REPAIR_S = 20.0  # a replica refusing a bad frame (503) has this long to repair it


def replicas_serve(cluster: Cluster, database_url: str, final: dict[int, list[Row]]) -> list[str]:
    """Violations: a follower serving other records than the leader's final log."""
    engine = make_engine(database_url)
    try:
        secret = PartitionStateRepo(engine).cluster_secret()
    finally:
        engine.dispose()
    headers = {REPLICA_READ_HEADER: "1", CLUSTER_TOKEN_HEADER: secret}
    problems: list[str] = []
    for p, rows in final.items():
        want = {r.offset: (r.key, r.value) for r in rows}
        for broker_id, broker in sorted(cluster.brokers.items()):
            offset, end = 0, len(rows)
            deadline = time.monotonic() + REPAIR_S
            while offset < end:
                r = broker.http.get(
                    f"/topics/{TOPIC}/partitions/{p}/records",
                    params={"offset": offset, "max_records": 5000},
                    headers=headers,
                )
                if r.status_code == 503 and time.monotonic() < deadline:
                    time.sleep(0.5)  # refused (a corrupt frame is never served): repairing?
                    continue
                if r.status_code != 200:
                    problems.append(
                        f"broker {broker_id} read {p}@{offset}: {r.status_code} {r.text}"
                    )
                    break
                doc = r.json()
                for rec in doc["records"]:
                    got = (rec.get("key"), rec.get("value"))
                    if want.get(rec["offset"]) != got:
                        problems.append(
                            f"broker {broker_id} serves {got} at {p}:{rec['offset']}, "
                            f"the leader's log holds {want.get(rec['offset'])}"
                        )
                if doc["next_offset"] <= offset:
                    break
                offset = doc["next_offset"]
    if len(problems) > MAX_REPORTED:
        problems = [*problems[:MAX_REPORTED], f"... and {len(problems) - MAX_REPORTED} more"]
    return problems


def replicas_identical(cluster: Cluster, partitions: list[int]) -> list[str]:
    """Violations: replicas whose segment bytes differ (nothing is produced now, so followers
    catch up to the log end, and a repaired copy has had its chance to be re-fetched)."""
    problems = []
    for p in partitions:

        def same(p: int = p) -> bool:
            copies = {cluster.segment_bytes(b, TOPIC, p) for b in cluster.brokers.values()}
            return len(copies) == 1

        try:
            wait_for(f"byte-identical replicas of partition {p}", same, timeout=30)
        except AssertionError:
            copies = {i: cluster.segment_bytes(b, TOPIC, p) for i, b in cluster.brokers.items()}
            problems.append(f"partition {p}: replicas differ: {_first_difference(copies)}")
    return problems


def _first_difference(copies: dict[int, bytes]) -> str:
    ids = sorted(copies)
    base = copies[ids[0]]
    parts = [f"broker {ids[0]} {len(base)} bytes"]
    for i in ids[1:]:
        other = copies[i]
        at = next(
            (k for k, (a, b) in enumerate(zip(base, other, strict=False)) if a != b),
            min(len(base), len(other)),
        )
        same = "same" if other == base else f"first difference at byte {at}"
        parts.append(f"broker {i} {len(other)} bytes ({same})")
    return ", ".join(parts)
