"""Replication cost and failover time.

    .venv/bin/python -m bench.replication [--seconds 6] [--clients 4] [--trials 5]
    .venv/bin/python -m bench.replication --smoke    # 0.5 s per case, 1 trial (the test suite)

Starts its own Postgres. Measures, in one run: single-broker acks=1 produce throughput (the
baseline), then a 3-broker cluster with RF=3 and min.insync.replicas=2 at acks=1 and
acks=all (Arrow bodies of 1,000 ~100-byte records, clients sending to each partition's
leader), and failover time: kill -9 of a partition's leader → first successful acks=all
produce through a surviving node, over several trials, stated against the controller lease the
cluster really runs with. Each case checks that its partition holds every acknowledged record.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.databases import new_database
from bench.load import LoadResult, run_load
from bench.produce import ARROW, arrow_body, values
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for
from tierlog.devstack.localpg import LocalPostgres

PATH = "/topics/bench/records?acks={acks}"


def _load(
    broker: BrokerProcess, acks: str, body: bytes, clients: int, seconds: float
) -> LoadResult:
    """Warm-up, then the measured load; checks the log grew by every acknowledged record."""
    run_load(broker.port, PATH.format(acks=acks), body, ARROW, 1000, clients, min(1.0, seconds))
    before = _log_end(broker)
    result = run_load(broker.port, PATH.format(acks=acks), body, ARROW, 1000, clients, seconds)
    # acks=1: the high watermark follows once the followers have the records.
    wait_for(
        f"every record acknowledged with acks={acks} below the high watermark",
        lambda: _log_end(broker) - before >= result.records,
    )
    return result


def _log_end(broker: BrokerProcess) -> int:
    return int(broker.fetch("bench", 0, 0, max_records=1)["high_watermark"])


def _flag(broker: BrokerProcess, name: str) -> str:
    """The value the broker process was started with for `--name`."""
    args = broker.extra_args
    return str(args[args.index(name) + 1])


def _failover_trial(c: Cluster, topic: str) -> float:
    leader = c.leader(topic)
    survivor = c.any(exclude=leader.broker_id)
    leader.kill(signal.SIGKILL)
    started = time.monotonic()
    client = httpx.Client(base_url=survivor.url, timeout=5)
    while time.monotonic() - started < 60:
        try:
            r = client.post(
                f"/topics/{topic}/records",
                params={"acks": "all"},
                json={"records": [{"value": "probe", "partition": 0}]},
            )
            if r.status_code == 200 and "offset" in r.json()["offsets"][0]:
                elapsed = time.monotonic() - started
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    else:
        raise SystemExit("no acks=all produce succeeded within 60 s of the leader's kill")
    leader.start()
    wait_for("full ISR again", lambda: len(c.partition(topic)["isr"]) == 3, timeout=60)
    return elapsed


def _create_replicated(c: Cluster, topic: str) -> None:
    """An RF=3 topic with min.insync.replicas=2, once its ISR is full."""
    r = c.any().http.post(
        "/topics",
        json={
            "name": topic,
            "partitions": 1,
            "replication_factor": 3,
            "configs": {"min.insync.replicas": 2},
        },
    )
    assert r.status_code == 201, r.text
    wait_for(f"full ISR of {topic}", lambda: len(c.partition(topic)["isr"]) == 3)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="1 client, 0.5 s per case, 1 trial")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.clients, args.trials = 0.5, 1, 1
    body = arrow_body(values(1000))
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        os.chmod(tmp, 0o755)
        pg = LocalPostgres(Path(tmp) / "pg")
        url = pg.start()
        rows: list[tuple[str, LoadResult]] = []
        try:
            single = BrokerProcess(url, Path(tmp) / "single", 99).start()
            single.create_topic("bench")
            rows.append(("1 broker, acks=1", _load(single, "1", body, args.clients, args.seconds)))
            single.stop()
            single.http.close()
            # A database of its own for the cluster, so the single broker is not in the way.
            (Path(tmp) / "cluster").mkdir()
            c = Cluster(new_database(url, "cluster"), Path(tmp) / "cluster", 3).start()
            _create_replicated(c, "bench")
            leader = c.leader("bench")
            for acks in ("1", "all"):
                rows.append(
                    (
                        f"3 brokers RF=3, acks={acks}",
                        _load(leader, acks, body, args.clients, args.seconds),
                    )
                )
            lease_s = int(_flag(leader, "--lease-ms")) / 1000
            _create_replicated(c, "probe")
            times = [_failover_trial(c, "probe") for _ in range(args.trials)]
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
    print(
        f"\nfailover (kill -9 leader → first acks=all success via another node), "
        f"{len(times)} trials, controller lease {lease_s:g} s: "
        f"p50 {statistics.median(times):.2f} s, "
        f"min {min(times):.2f} s, max {max(times):.2f} s"
    )
    print("trials: " + ", ".join(f"{t:.2f}" for t in times))


if __name__ == "__main__":
    main()
