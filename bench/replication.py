"""Replication cost and failover time.

    .venv/bin/python -m bench.replication [--seconds 6] [--clients 4] [--trials 5]
    .venv/bin/python -m bench.replication --smoke    # 0.25 s per case, 1 trial (the test suite)

Starts its own Postgres. Measures, in one run: single-broker acks=1 produce throughput (the
baseline), then a 3-broker cluster with RF=3 and min.insync.replicas=2 at acks=1 and
acks=all (Arrow bodies of 1,000 ~100-byte records, clients sending to each partition's
leader), and failover time: kill -9 of a partition's leader → first successful acks=all
produce through a surviving node, over several trials, stated against the broker lease the
cluster really runs with (the lease is the safety net: a killed leader's refused connections
end it sooner, ingest/replication/death_signal.py). Each case checks that its partition holds
every acknowledged record.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import httpx

from bench.databases import new_database
from bench.load import LoadResult, run_load
from bench.produce import ARROW, arrow_body, values
from bench.servers import bench_postgres
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for


def measured_load(
    broker: BrokerProcess,
    acks: str,
    body: bytes,
    clients: int,
    seconds: float,
    topic: str = "bench",
    records_per_body: int = 1000,
) -> LoadResult:
    """Warm-up, then the measured load of `body` (`records_per_body` records) posted to
    partition 0 of `topic` by `clients` processes; checks the log grew by every
    acknowledged record."""
    path = f"/topics/{topic}/records?acks={acks}"
    run_load(broker.port, path, body, ARROW, records_per_body, clients, min(1.0, seconds))
    before = _log_end(broker, topic)
    result = run_load(broker.port, path, body, ARROW, records_per_body, clients, seconds)
    # acks=1: the high watermark follows once the followers have the records.
    wait_for(
        f"every record acknowledged with acks={acks} below the high watermark",
        lambda: _log_end(broker, topic) - before >= result.records,
    )
    return result


def _log_end(broker: BrokerProcess, topic: str) -> int:
    return int(broker.fetch(topic, 0, 0, max_records=1)["high_watermark"])


def _flag(broker: BrokerProcess, name: str) -> str:
    """The value the broker process was started with for `--name`."""
    args = broker.extra_args
    return str(args[args.index(name) + 1])


class Failover(NamedTuple):
    elected_s: float  # kill → a surviving node describes a new leader (detection + election)
    acked_s: float  # kill → first acks=all success through a surviving node


def _new_leader(client: httpx.Client, topic: str, old: int) -> bool:
    leader = client.get(f"/topics/{topic}").json()["partitions"][0]["leader"]
    return leader is not None and leader != old


def _failover_trial(c: Cluster, topic: str, rejoin: bool = True) -> Failover:
    leader = c.leader(topic)
    survivor = c.any(exclude=leader.broker_id)
    leader.kill(signal.SIGKILL)
    started = time.monotonic()
    client = httpx.Client(base_url=survivor.url, timeout=5)
    elected: float | None = None
    while time.monotonic() - started < 60:
        try:
            if elected is None and _new_leader(client, topic, leader.broker_id):
                elected = time.monotonic() - started
            r = client.post(
                f"/topics/{topic}/records",
                params={"acks": "all"},
                json={"records": [{"value": "probe", "partition": 0}]},
            )
            if r.status_code == 200 and "offset" in r.json()["offsets"][0]:
                acked = time.monotonic() - started
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    else:
        raise SystemExit("no acks=all produce succeeded within 60 s of the leader's kill")
    client.close()
    if rejoin:  # the next trial needs three replicas again; after the last, nobody does
        leader.start()
        wait_for("full ISR again", lambda: len(c.partition(topic)["isr"]) == 3, timeout=60)
    return Failover(acked if elected is None else elected, acked)


def create_replicated(c: Cluster, topic: str, partitions: int = 1, **configs: object) -> None:
    """An RF=3 topic with min.insync.replicas=2 (and `configs`), once every ISR is full."""
    r = c.any().http.post(
        "/topics",
        json={
            "name": topic,
            "partitions": partitions,
            "replication_factor": 3,
            "configs": {"min.insync.replicas": 2, **configs},
        },
    )
    assert r.status_code == 201, r.text
    for p in range(partitions):
        wait_for(f"full ISR of {topic}-{p}", functools.partial(_full_isr, c, topic, p))


def _full_isr(c: Cluster, topic: str, p: int) -> bool:
    return len(c.partition(topic, p)["isr"]) == 3


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="1 client, 0.25 s per case, 1 trial")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.clients, args.trials = 0.25, 1, 1
    body = arrow_body(values(1000))
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        os.chmod(tmp, 0o755)
        pg = bench_postgres(Path(tmp) / "pg", fast=args.smoke)  # --no-sync: only the smoke
        url = pg.start()
        rows: list[tuple[str, LoadResult]] = []
        try:
            single = BrokerProcess(url, Path(tmp) / "single", 99).start()
            single.create_topic("bench")
            rows.append(
                ("1 broker, acks=1", measured_load(single, "1", body, args.clients, args.seconds))
            )
            single.stop()
            single.http.close()
            # A database of its own for the cluster, so the single broker is not in the way.
            (Path(tmp) / "cluster").mkdir()
            c = Cluster(new_database(url, "cluster"), Path(tmp) / "cluster", 3).start()
            create_replicated(c, "bench")
            leader = c.leader("bench")
            for acks in ("1", "all"):
                rows.append(
                    (
                        f"3 brokers RF=3, acks={acks}",
                        measured_load(leader, acks, body, args.clients, args.seconds),
                    )
                )
            lease_s = int(_flag(leader, "--lease-ms")) / 1000
            heartbeat_s = int(_flag(leader, "--heartbeat-ms")) / 1000
            create_replicated(c, "probe")
            times = [_failover_trial(c, "probe", k < args.trials - 1) for k in range(args.trials)]
            c.stop()
        finally:
            pg.stop()
    base = rows[0][1]
    print(
        f"tierlog replication benchmark: Arrow bodies of 1,000 records, {args.clients} client "
        f"processes, {args.seconds:g} s per case, "
        f"{os.cpu_count()} cores shared by all brokers and clients"
    )
    print(
        f"\n{'case':<28} {'records/s':>12} {'MB/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'errors':>6} {'vs 1 broker':>11}"
    )
    for name, r in rows:
        print(
            f"{name:<28} {r.records_per_s:>12,.0f} {r.mb_per_s:>8.1f} {r.pct(0.5):>8.2f} "
            f"{r.pct(0.99):>8.2f} {r.errors:>6} {r.records_per_s / base.records_per_s:>10.0%}"
        )
    acked = [t.acked_s for t in times]
    elected = [t.elected_s for t in times]
    print(
        f"\nfailover (kill -9 leader → first acks=all success via another node), "
        f"{len(times)} trials, broker lease {lease_s:g} s (heartbeat {heartbeat_s:g} s; a "
        f"killed leader's refused connections end its lease before it lapses): "
        f"p50 {statistics.median(acked):.2f} s, "
        f"min {min(acked):.2f} s, max {max(acked):.2f} s; of which detection + election "
        f"(a new leader described) p50 {statistics.median(elected):.2f} s"
    )
    print(
        "trials (elected/acked s): "
        + ", ".join(f"{t.elected_s:.2f}/{t.acked_s:.2f}" for t in times)
    )


if __name__ == "__main__":
    main()
