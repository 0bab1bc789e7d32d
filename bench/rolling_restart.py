"""Rolling restart under load (issue 26 item 6).

    .venv/bin/python -m bench.rolling_restart [--before 20] [--partitions 6]
    .venv/bin/python -m bench.rolling_restart --smoke    # short phases (the test suite)

Starts its own Postgres and a three-broker cluster (RF=3, min.insync.replicas=2), with
idempotent acks=all producers over HTTP and over Kafka (confluent-kafka) and two Kafka
consumers in one group. After a phase of load alone ("before"), each broker in turn gets
SIGTERM, is started again, and the next waits until every partition's ISR is whole again
("during"). Then every partition must be led by its preferred replica again (the leaders move
back by themselves), the full log must hold every acknowledged record at its acknowledged
offset, and the clients must have met only errors they retry. It prints produce latency before
and during the restarts (the goal: p99 during at most 3x p99 before) and exits 1 if a record
was lost, a client met an error it does not retry, or a leader is not back where it belongs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from bench.rolling_load import (
    TOPIC,
    ClientStats,
    GroupConsumer,
    HttpProducer,
    KafkaProducerLoad,
)
from bench.servers import bench_postgres
from tests.integration.cluster import Cluster, wait_for

GOAL = 3.0  # p99 during the restarts at most this many times p99 before
PREFERRED_S = 90.0  # leaders back on their preferred replicas within this after the last one
START_S = 180.0  # a broker's start takes 20-30 s on a loaded 2-core machine


def _isr_whole(c: Cluster) -> bool:
    return all(len(p["isr"]) == 3 for p in c.describe(TOPIC)["partitions"])


def _on_preferred(c: Cluster) -> list[str]:
    """Partitions not led by their preferred (first) replica."""
    return [
        f"{p['partition']} (leader {p['leader']}, preferred {p['replicas'][0]})"
        for p in c.describe(TOPIC)["partitions"]
        if p["leader"] != p["replicas"][0]
    ]


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def _roll(c: Cluster) -> list[str]:
    """SIGTERM each broker, start it again, wait for whole ISRs; what happened, per broker."""
    steps = []
    for i, b in sorted(c.brokers.items()):
        start = time.monotonic()
        b.stop()  # SIGTERM: a clean shutdown gives its lease up, leadership moves at once
        b.start(wait=False)
        b.wait_ready(START_S)
        wait_for(f"whole ISRs after broker {i}'s restart", lambda: _isr_whole(c), timeout=120)
        steps.append(f"broker {i}: restarted, ISRs whole after {time.monotonic() - start:.1f} s")
    return steps


def _lost(c: Cluster, stats: list[ClientStats]) -> list[str]:
    """Acknowledged records not in the final log at their offset."""
    logs = {
        p: {r["offset"]: r["value"] for r in c.leader(TOPIC, p).fetch_all(TOPIC, p)}
        for p in range(len(c.describe(TOPIC)["partitions"]))
    }
    return [
        f"{v} at {p}:{o} (log holds {logs.get(p, {}).get(o)!r})"
        for s in stats
        for p, o, v in s.acked
        if logs.get(p, {}).get(o) != v
    ]


def _phase(stats: list[ClientStats], start: float, end: float) -> tuple[int, float, float]:
    lat = [d for s in stats for t, d in s.latencies if start <= t < end]
    return len(lat), _pct(lat, 0.5), _pct(lat, 0.99)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--before", type=float, default=20, help="seconds of load before")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--kafka-rate", type=int, default=100, help="Kafka records/s")
    parser.add_argument(
        "--pause-ms", type=float, default=10, help="each HTTP producer's pause between batches"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="3 partitions, 2 s before, a lighter load"
    )
    parser.add_argument("--keep", action="store_true", help="keep the logs and data dirs")
    args = parser.parse_args()
    if args.smoke:
        args.before, args.partitions, args.kafka_rate, args.pause_ms = 2.0, 3, 10, 100
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        if args.keep:
            tmp = tempfile.mkdtemp(prefix="tierlog-rolling-")
            print(f"logs and data in {tmp}", flush=True)
        os.chmod(tmp, 0o755)
        pg = bench_postgres(Path(tmp) / "pg", fast=args.smoke)
        url = pg.start()
        try:
            return _run(Cluster(url, Path(tmp), 3, kafka=True), args)
        finally:
            pg.stop()


def _run(c: Cluster, args: argparse.Namespace) -> int:
    c.start(START_S)
    stop = threading.Event()
    before_s, partitions = args.before, args.partitions
    try:
        c.create_topic(TOPIC, partitions, min_insync_replicas=2)
        pause = args.pause_ms / 1000
        http = [HttpProducer(c, f"http{i}", partitions, stop, pause) for i in range(2)]
        kafka = KafkaProducerLoad(c, "kafka", stop, args.kafka_rate)
        group = [GroupConsumer(c, f"member{i}", "rolling-readers", stop) for i in range(2)]
        clients: list[threading.Thread] = [*http, kafka, *group]
        for t in clients:
            t.start()
        t0 = time.monotonic()
        time.sleep(before_s)
        t1 = time.monotonic()
        steps = _roll(c)
        t2 = time.monotonic()
        with contextlib.suppress(AssertionError):  # reported below
            wait_for("preferred leaders", lambda: not _on_preferred(c), PREFERRED_S)
        stop.set()
        for t in clients:
            t.join(90)
        stats = [*(p.stats for p in http), kafka.stats]
        load = (
            f"2 HTTP producers (idempotent, batches of 10, {args.pause_ms:g} ms apart), 1 Kafka "
            f"producer (confluent-kafka, idempotent, {args.kafka_rate} rec/s), 2 Kafka "
            f"consumers in one group"
        )
        return _report(c, stats, [g.stats for g in group], (t0, t1, t2), steps, group, load)
    finally:
        stop.set()
        c.stop()


def _report(
    c: Cluster,
    stats: list[ClientStats],
    readers: list[ClientStats],
    times: tuple[float, float, float],
    steps: list[str],
    group: list[GroupConsumer],
    load: str,
) -> int:
    t0, t1, t2 = times
    lost, astray = _lost(c, stats), _on_preferred(c)
    retried = sum((s.retried for s in (*stats, *readers)), Counter[str]())
    failed = sum((s.failed for s in (*stats, *readers)), Counter[str]())
    before, during = _phase(stats, t0, t1), _phase(stats, t1, t2)
    print(
        "tierlog rolling restart benchmark: 3 brokers RF=3, min.insync.replicas=2, acks=all; "
        f"{load}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(f"\n{'phase':<28} {'seconds':>8} {'produces':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for name, (n, p50, p99), secs in (
        ("before (load only)", before, t1 - t0),
        ("during (rolling restart)", during, t2 - t1),
    ):
        print(f"{name:<28} {secs:>8.1f} {n:>9} {p50:>8.1f} {p99:>8.1f}")
    ratio = during[2] / before[2]
    print(f"\np99 during / before: {ratio:.1f}x (goal <= {GOAL:g}x)")
    print("\n".join(steps))
    acked = sum(len(s.acked) for s in stats)
    print(f"acknowledged records: {acked}, lost: {len(lost)}")
    print(f"errors the clients retried: {dict(retried) or 'none'}")
    print(f"errors the clients did not retry: {dict(failed) or 'none'}")
    print(f"records the group read: {sum(g.read for g in group)}")
    print(f"partitions off their preferred leader at the end: {astray or 'none'}")
    for line in lost[:20]:
        print(f"LOST: {line}")
    ok = not lost and not failed and not astray
    print("rolling restart: " + ("every guarantee held" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
