"""The whole data path at a fixed offered rate: Producer → 3 brokers → tiering → Delta table.

    .venv/bin/python -m bench.pipeline [--start-mb 2] [--step-factor 1.5] [--step-s 30]
                                       [--hold-s 180] [--partitions 3] [--clients 2]
    .venv/bin/python -m bench.pipeline --smoke     # tiny sizes, seconds (the test suite)

Starts its own Postgres, moto's S3 server (in memory, on loopback) and, in one run:

1. the baseline: one broker, acks=1, raw Arrow bodies of the same ~1 KB keyed events posted
   by client processes at full speed (bench/replication.py's measured load);
2. a 3-broker cluster (RF=3, min.insync.replicas=2) with --workers `tierlog tiering`
   processes; client processes running `tierlog.Producer` (acks=all, send_batch of 500
   records) offer fixed rates, stepping up by --step-factor every --step-s, while the tiering
   lag (the brokers' tierlog_remote_copy_lag_bytes / _seconds) is sampled twice a second. A
   step is sustained when the producers got within 10% of the offered rate without errors
   and the lag did not grow: in the step's last third its peaks stayed within one segment per
   partition of the middle third's, and its troughs within one segment. The first step that
   is not sustained ends the stepping;
3. after the backlog drains, a hold of --hold-s at the highest sustained rate: produce
   latency, and freshness: from each record's acknowledgement until a Delta table version
   holds it (a watcher polls the table's files and their offset statistics every --watch-ms).

Checked: when everything is drained, the Delta table holds every partition's offsets from 0
without gap or duplicate, up to and including every acknowledged offset (each acknowledged
record is in the table exactly once). segment.ms is set so that the active segment rolls (and
gets tiered) when produce stops: freshness includes that wait at low rates.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from bench.databases import new_database
from bench.events import arrow_body, make_records
from bench.load import LoadResult
from bench.pipeline_check import DeltaWatcher, LagSample, check_exactly_once, freshness, lag_of
from bench.pipeline_load import CHUNK, Load, run_clients
from bench.replication import create_replicated, measured_load
from bench.servers import bench_postgres
from coldstore.layout import table_uri
from coldstore.object_store import ObjectStore
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster
from tests.integration.s3 import MotoServer, config_for

MiB = 1 << 20
TOPIC = "pipeline"
TIERING = [sys.executable, "-m", "tierlog", "tiering", "--poll-ms", "200"]


class Step(NamedTuple):
    load: Load
    lag: list[LagSample]
    sustained: bool


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _baseline(url: str, tmp: Path, args: argparse.Namespace, body: bytes) -> LoadResult:
    single = BrokerProcess(url, tmp / "single", 99).start()
    try:
        single.create_topic("bench", segment_bytes=args.segment_mb * MiB)
        return measured_load(
            single, "1", body, args.clients, args.baseline_s, records_per_body=CHUNK
        )
    finally:
        single.stop()
        single.http.close()


def _step(c: Cluster, rate: float, seconds: float, args: argparse.Namespace, seed: int) -> Step:
    """One fixed offered rate; the lag sampled meanwhile."""
    samples: list[LagSample] = []
    stop = threading.Event()

    def sample() -> None:
        t0 = time.monotonic()
        while not stop.wait(0.5):
            samples.append(lag_of(c.alive(), TOPIC, time.monotonic() - t0))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        load = run_clients(c.any().url, TOPIC, rate, seconds, args.clients, args.value_bytes, seed)
    finally:
        stop.set()
        sampler.join()
    return Step(load, samples, _sustained(load, samples, args))


def _sustained(load: Load, samples: list[LagSample], args: argparse.Namespace) -> bool:
    """The producers kept the offered rate and the lag did not keep growing: over the step's
    last third its peaks stayed within one segment per partition of the middle third's
    (partitions seal together) and its troughs within one segment (a backlog lifts the
    troughs). The first third is left out: the lag is still filling up from the step's start."""
    if load.errors or load.records_per_s < 0.9 * load.offered or len(samples) < 3:
        return False
    third = len(samples) // 3
    middle, late = (
        [s.bytes for s in samples[third : 2 * third]],
        [s.bytes for s in samples[2 * third :]],
    )
    segment = args.segment_mb * MiB
    peaks = max(late) <= max(middle) + args.partitions * segment
    return bool(peaks and min(late) <= min(middle) + segment)


def _drain(c: Cluster, watcher: DeltaWatcher, acked_ends: dict[int, int], timeout: float) -> float:
    """Wait until the Delta table holds every acknowledged offset; how long it took."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        covered = watcher.covered()
        if all(covered.get(p, -1) >= last for p, last in acked_ends.items()):
            return time.monotonic() - t0
        time.sleep(0.25)
    raise SystemExit(f"the Delta table did not catch up in {timeout:g} s: {watcher.covered()}")


def _workers(n: int, env: dict[str, str], log: Path) -> list[subprocess.Popen[bytes]]:
    with log.open("ab") as sink:
        return [
            subprocess.Popen(
                [*TIERING, "--worker-id", f"bench-{i}"],
                env={**os.environ, **env},
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
            for i in range(n)
        ]


def _pipeline(
    url: str, tmp: Path, s3_env: dict[str, str], args: argparse.Namespace, uri: str, opts: Any
) -> tuple[list[Step], Step | None, list[float], int]:
    (tmp / "cluster").mkdir()
    db = new_database(url, "cluster")
    c = Cluster(db, tmp / "cluster", 3, env=s3_env).start(ready_timeout=120)
    workers = _workers(args.workers, {**s3_env, "TIERLOG_DATABASE_URL": db}, tmp / "tiering.log")
    watcher = DeltaWatcher(uri, opts, args.watch_ms / 1000)
    try:
        seg = args.segment_mb * MiB
        configs = {"segment.bytes": seg, "segment.ms": args.segment_ms}
        # Tiered segments leave the brokers' disks soon (the hot tier is not measured here).
        configs["local.retention.bytes"] = 4 * seg
        create_replicated(c, TOPIC, args.partitions, **configs)
        watcher.start()
        steps: list[Step] = []
        rate = args.start_mb * 1e6 / (args.value_bytes + 40)
        acked: list[Any] = []
        for k in range(args.steps):
            step = _step(c, rate, args.step_s, args, seed=100 * k)
            steps.append(step)
            acked += step.load.acked
            if not step.sustained:
                break
            rate *= args.step_factor
        ends = _ends(acked)
        _drain(c, watcher, ends, args.drain_s)
        best = max((s for s in steps if s.sustained), key=lambda s: s.load.offered, default=None)
        if best is None and args.smoke:
            best = steps[0]  # a smoke run exercises the hold whatever a loaded machine did
        hold: Step | None = None
        fresh: list[float] = []
        if best is not None:
            hold = _step(c, best.load.offered, args.hold_s, args, seed=10_000)
            acked += hold.load.acked
            _drain(c, watcher, _ends(acked), args.drain_s)
            fresh = freshness(hold.load.acked, watcher.history())
        watcher.stop()
        total = check_exactly_once(uri, opts, _ends(acked), args.partitions)
        return steps, hold, fresh, total
    finally:
        watcher.stop()
        for w in workers:
            w.terminate()
            w.wait(30)
        c.stop()


def _ends(acked: list[Any]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for a in acked:
        ends[a.partition] = max(ends.get(a.partition, -1), a.last)
    return ends


def _report(
    args: argparse.Namespace,
    base: LoadResult,
    steps: list[Step],
    hold: Step | None,
    fresh: list[float],
    total: int,
    machine: tuple[float, float],
) -> None:
    record_bytes = args.value_bytes + 40
    print(
        f"tierlog pipeline benchmark: Producer (acks=all, send_batch of {CHUNK}) → 3 brokers "
        f"RF=3 min.insync=2, {args.partitions} partitions → {args.workers} tiering worker(s) "
        f"→ Delta table; ~{record_bytes} B keyed JSON events; segment.bytes "
        f"{args.segment_mb} MiB, segment.ms {args.segment_ms}, local.retention.bytes 4 "
        f"segments; {args.clients} client "
        f"processes; moto S3 in memory; {os.cpu_count()} cores shared by everything"
    )
    print(
        f"\nbaseline: 1 broker, acks=1, raw Arrow bodies of {CHUNK} records, {args.clients} "
        f"clients, {base.seconds:.1f} s: {base.records_per_s:,.0f} records/s "
        f"({base.mb_per_s:.1f} MB/s of bodies)"
    )
    print(
        f"\n{'offered rec/s':>13} {'got rec/s':>10} {'MB/s':>6} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'errors':>6} {'lag MB max':>10} {'lag MB end':>10} {'lag s max':>9}  sustained"
    )
    for s in steps:
        _step_row(s)
    if hold is None:
        print("\nno offered rate was sustained: no hold, no freshness")
    else:
        load = hold.load
        print(
            f"\nsustainable rate (held {load.seconds:.0f} s): {load.records_per_s:,.0f} "
            f"records/s, {load.mb_per_s:.1f} MB/s of raw records; "
            f"{load.records_per_s / base.records_per_s:.0%} of 1 broker acks=1"
        )
        _step_row(hold)
        if not hold.sustained:
            print(
                "   the hold did NOT stay bounded on this run (the rate was sustained for one "
                f"{args.step_s:g} s step only): the sustainable rate is below this one"
            )
        print(
            f"produce p50 {_pct(load.latencies_ms, 0.5):.1f} ms, p99 "
            f"{_pct(load.latencies_ms, 0.99):.1f} ms; produce→Delta freshness p50 "
            f"{_pct(fresh, 0.5):.2f} s, p99 {_pct(fresh, 0.99):.2f} s ({len(fresh):,} runs)"
        )
    print(
        f"machine load average (1 min) before / after the run: {machine[0]:.1f} / {machine[1]:.1f}"
    )
    print(f"checked: {total:,} records in the Delta table, each acknowledged offset exactly once")


def _step_row(s: Step) -> None:
    load, lag = s.load, s.lag
    print(
        f"{load.offered:>13,.0f} {load.records_per_s:>10,.0f} {load.mb_per_s:>6.1f} "
        f"{_pct(load.latencies_ms, 0.5):>7.1f} {_pct(load.latencies_ms, 0.99):>7.1f} "
        f"{load.errors:>6} {max((x.bytes for x in lag), default=0) / 1e6:>10.1f} "
        f"{(lag[-1].bytes if lag else 0) / 1e6:>10.1f} "
        f"{max((x.seconds for x in lag), default=0):>9.1f}  {'yes' if s.sustained else 'NO'}"
    )


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--start-mb", type=float, default=2.0, help="first offered rate, MB/s")
    p.add_argument("--step-factor", type=float, default=1.5)
    p.add_argument("--step-s", type=float, default=30)
    p.add_argument("--steps", type=int, default=8, help="at most this many steps")
    p.add_argument("--hold-s", type=float, default=180, help="the hold at the sustained rate")
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--segment-mb", type=int, default=8)
    p.add_argument("--segment-ms", type=int, default=5000)
    p.add_argument("--value-bytes", type=int, default=1024)
    p.add_argument(
        "--watch-ms", type=int, default=1000, help="Delta table poll interval (moto serves it too)"
    )
    p.add_argument("--baseline-s", type=float, default=6)
    p.add_argument("--drain-s", type=float, default=300, help="longest wait for the backlog")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, one short step")
    args = p.parse_args()
    if args.smoke:
        # One step (its code is the same at every rate) of 2 s: 4 lag samples, the least
        # _sustained judges; a faster watcher and roll, so the drains wait less.
        args.start_mb, args.step_s, args.steps, args.hold_s = 1, 2, 1, 2
        args.partitions, args.clients, args.segment_mb, args.segment_ms = 2, 1, 1, 500
        args.baseline_s, args.drain_s, args.watch_ms = 0.5, 60, 250
    return args


def main() -> None:
    args = _args()
    load_before = os.getloadavg()[0]
    body = arrow_body(*make_records(random.Random(7), CHUNK, args.value_bytes))
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp, MotoServer() as moto:
        os.chmod(tmp, 0o755)  # as root, Postgres runs as the postgres user
        pg = bench_postgres(Path(tmp) / "pg", fast=True)
        url = pg.start()
        config = config_for(moto.endpoint, "bench")
        ObjectStore(config).ensure_bucket()
        s3_env = {
            "TIERLOG_S3_ENDPOINT": moto.endpoint,
            "TIERLOG_S3_BUCKET": config.bucket,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": config.region,
        }
        try:
            base = _baseline(url, Path(tmp), args, body)
            uri, opts = table_uri(config, TOPIC), config.storage_options()
            steps, hold, fresh, total = _pipeline(url, Path(tmp), s3_env, args, uri, opts)
        finally:
            pg.stop()
    _report(args, base, steps, hold, fresh, total, (load_before, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
