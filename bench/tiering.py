"""Tiering: one worker's throughput, its lag under full-speed produce, cold size vs raw.

    .venv/bin/python -m bench.tiering [--segments 24] [--segment-mb 8] [--value-bytes 1024]
                                      [--seconds 20] [--clients 3] [--lag-segment-mb 8]

Starts its own Postgres, moto's S3 server (in memory, on loopback: the figures are the
worker's CPU and protocol cost, not a network's) and one real broker; records are ~1 KB JSON
events (distinct, of realistic compressibility) keyed by user id. In one run:

1. throughput: produce --segments sealed segments of --segment-mb, then time one tiering
   worker (in this process) tiering all of them: records/s, MB/s of raw record bytes (key +
   value) and of Parquet written, and where the time goes per step;
2. lag: a `tierlog tiering` process runs while --clients processes produce at full speed
   (acks=1) for --seconds; the lag (sealed segments and records not yet tiered, and describe's
   tiering_lag, which includes the active segment) is sampled twice a second; then how long
   the worker takes to drain it once produce stops;
3. cold size: Parquet bytes against raw record bytes and against the hot segment bytes.
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
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from bench.events import arrow_body, make_records
from bench.load import LoadResult, run_load
from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.segment_registry import SegmentRegistry
from metadata.types import TopicIdPartition
from tests.integration.brokers import BrokerProcess
from tests.integration.s3 import MotoServer, config_for
from tiering.worker import TieringWorker
from tierlog.devstack.localpg import LocalPostgres

ARROW = "application/vnd.apache.arrow.stream"
MiB = 1 << 20
MB = 1e6
BATCH = 500  # records per produce request (~0.5 MB bodies)


class BenchEnv(NamedTuple):
    url: str  # Postgres
    config: ObjectStoreConfig
    s3_env: dict[str, str]
    broker: BrokerProcess
    tmp: Path


def _create(env: BenchEnv, name: str, segment_mb: int) -> str:
    doc = env.broker.create_topic(name, 1, segment_bytes=segment_mb * MiB)
    return str(doc["id"])


def _sealed(engine: Any, tid: str) -> int:
    return len(SegmentRegistry(engine).segments(TopicIdPartition(tid, 0)))


# -- 1. throughput ---------------------------------------------------------------------------


class Throughput(NamedTuple):
    segments: int
    records: int
    raw_bytes: int
    hot_bytes: int
    parquet_bytes: int
    seconds: float
    steps: dict[str, float]

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds


def _timed(steps: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            steps[name] += time.perf_counter() - t0

    return wrapper


def throughput(
    env: BenchEnv, engine: Any, segments: int, segment_mb: int, value_bytes: int
) -> Throughput:
    tid = _create(env, "bulk", segment_mb)
    rng = random.Random(1)
    raw_by_offset: list[int] = []  # raw bytes of record i (offsets are dense from 0)
    http = httpx.Client(base_url=env.broker.url, timeout=60)
    while _sealed(engine, tid) < segments:
        keys, values = make_records(rng, BATCH, value_bytes)
        r = http.post(
            "/topics/bulk/records?acks=1",
            content=arrow_body(keys, values),
            headers={"content-type": ARROW},
        )
        r.raise_for_status()
        raw_by_offset += [len(k) + len(v) for k, v in zip(keys, values, strict=True)]
        if len(raw_by_offset) * value_bytes > (segments + 1) * segment_mb * MiB * 1.2:
            time.sleep(0.1)  # all produced: wait for the broker to register the seals
    http.close()

    worker = TieringWorker(engine, env.config, "bench-throughput")
    steps: dict[str, float] = defaultdict(float)
    worker.source.download = _timed(steps, "download from broker", worker.source.download)  # type: ignore[method-assign]
    worker._write_parquet = _timed(steps, "segment → Parquet", worker._write_parquet)  # type: ignore[method-assign]
    worker.store.put = _timed(steps, "S3 upload", worker.store.put)  # type: ignore[method-assign]
    worker._commit_delta = _timed(steps, "Delta commit", worker._commit_delta)  # type: ignore[method-assign]
    worker.registry.mark_tiered = _timed(steps, "manifest commit", worker.registry.mark_tiered)  # type: ignore[method-assign]
    # Creating the table is a one-off, not per-segment cost.
    DeltaTopicTable(table_uri(env.config, "bulk"), env.config.storage_options()).ensure_created()
    started = time.perf_counter()
    while worker.run_once():
        pass
    seconds = time.perf_counter() - started
    worker.close()
    steps["claims, leases, manifest rows"] = seconds - sum(steps.values())

    files = ColdManifest(engine).files(TopicIdPartition(tid, 0))
    segs = [
        s for s in SegmentRegistry(engine).segments(TopicIdPartition(tid, 0)) if s.state == "tiered"
    ]
    end = max(f.last_offset for f in files) + 1
    return Throughput(
        segments=len(files),
        records=sum(f.records for f in files),
        raw_bytes=sum(raw_by_offset[:end]),
        hot_bytes=sum(s.size_bytes for s in segs),
        parquet_bytes=sum(f.size_bytes for f in files),
        seconds=seconds,
        steps=dict(steps),
    )


# -- 2. lag under steady produce -------------------------------------------------------------


class Sample(NamedTuple):
    t: float
    sealed_segments: int  # sealed, not yet tiered
    sealed_records: int
    describe_lag: int  # high watermark - tiered end: includes the active segment


class Lag(NamedTuple):
    load: LoadResult
    samples: list[Sample]  # during produce
    tiered_during: int  # records that reached the cold tier while producing
    drain_s: float | None  # produce stopped → nothing sealed left untiered
    left_after_drain: int  # sealed records still untiered when the drain wait ended
    segment_mb: int


def _sample(engine: Any, http: httpx.Client, t0: float) -> Sample:
    rows = [u for u in SegmentRegistry(engine).untiered() if u.topic == "steady"]
    doc = http.get("/topics/steady").json()
    return Sample(
        time.monotonic() - t0,
        sum(u.segments for u in rows),
        sum(u.records for u in rows),
        int(doc["partitions"][0]["tiering_lag"] or 0),
    )


def paced_load(url: str, body: bytes, records: int, rate: float, seconds: float) -> LoadResult:
    """One client sending `body` (`records` records) at `rate` records/s, on schedule."""
    interval = records / rate
    lat: list[float] = []
    errors = 0
    with httpx.Client(timeout=30, headers={"content-type": ARROW}) as http:
        start = time.perf_counter()
        n = 0
        while (due := start + n * interval) < start + seconds:
            time.sleep(max(0.0, due - time.perf_counter()))
            t0 = time.perf_counter()
            if http.post(url, content=body).status_code != 200:
                errors += 1
            lat.append((time.perf_counter() - t0) * 1000)
            n += 1
        elapsed = time.perf_counter() - start
    ok = n - errors
    return LoadResult(n, ok * records, ok * len(body), elapsed, lat, errors)


def lag(
    env: BenchEnv,
    engine: Any,
    seconds: float,
    clients: int,
    segment_mb: int,
    value_bytes: int,
    drain_wait_s: float,
    rate: float,
) -> Lag:
    tid = _create(env, "steady", segment_mb)
    keys, values = make_records(random.Random(2), BATCH, value_bytes)
    body = arrow_body(keys, values)
    log = open(env.tmp / "tiering.log", "ab")  # noqa: SIM115 (closed below)
    worker = subprocess.Popen(
        [sys.executable, "-m", "tierlog", "tiering", "--poll-ms", "200", "--worker-id", "bench"],
        env={**os.environ, **env.s3_env, "TIERLOG_DATABASE_URL": env.url},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    manifest = ColdManifest(engine)
    http = httpx.Client(base_url=env.broker.url, timeout=30)
    try:
        result: list[LoadResult] = []
        path = "/topics/steady/records?acks=1"

        def load() -> None:
            if rate > 0:
                result.append(paced_load(env.broker.url + path, body, BATCH, rate, seconds))
            else:
                result.append(run_load(env.broker.port, path, body, ARROW, BATCH, clients, seconds))

        loader = threading.Thread(target=load)
        t0 = time.monotonic()
        loader.start()
        samples = []
        while loader.is_alive():
            samples.append(_sample(engine, http, t0))
            time.sleep(0.5)
        loader.join()
        tiered_during = manifest.tiered_end_offset(TopicIdPartition(tid, 0)) or 0
        stopped = time.monotonic()
        drain_s: float | None = None
        while True:
            last = _sample(engine, http, t0)
            if last.sealed_segments == 0:
                drain_s = time.monotonic() - stopped
                break
            if time.monotonic() - stopped > drain_wait_s:
                break
            time.sleep(0.2)
    finally:
        http.close()
        worker.terminate()
        worker.wait(30)
        log.close()
    return Lag(result[0], samples, tiered_during, drain_s, last.sealed_records, segment_mb)


# -- the run ---------------------------------------------------------------------------------


def _pct(xs: list[int], q: float) -> int:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0


def _row(name: str, xs: list[int], last: int) -> str:
    return f"{name:<36} {_pct(xs, 0.5):>10,} {max(xs, default=0):>10,} {last:>10,}"


def report(tp: Throughput, lg: Lag, args: argparse.Namespace) -> None:
    print(
        f"tierlog tiering benchmark: 1 broker, moto S3 (in memory), ~{args.value_bytes} B JSON "
        f"values with user-id keys, {os.cpu_count()} cores shared by broker, worker, S3, "
        f"Postgres and clients"
    )
    print(f"\n1. one worker tiering {tp.segments} sealed segments of {args.segment_mb} MiB")
    print(
        f"{'records':>10} {'seconds':>8} {'records/s':>11} {'raw MB/s':>9} "
        f"{'Parquet MB/s':>13} {'s/segment':>10}"
    )
    print(
        f"{tp.records:>10,} {tp.seconds:>8.2f} {tp.records_per_s:>11,.0f} "
        f"{tp.raw_bytes / MB / tp.seconds:>9.1f} {tp.parquet_bytes / MB / tp.seconds:>13.1f} "
        f"{tp.seconds / tp.segments:>10.3f}"
    )
    steps = sorted(tp.steps.items(), key=lambda kv: -kv[1])
    print("   time per step: " + ", ".join(f"{n} {100 * s / tp.seconds:.0f}%" for n, s in steps))

    load, samples = lg.load, lg.samples
    produce_rate = load.records / load.seconds
    final = samples[-1] if samples else Sample(0, 0, 0, 0)
    kept_up = final.sealed_segments <= 2 and tp.records_per_s >= produce_rate
    how = (
        f"{args.clients} clients produce at full speed"
        if not args.rate
        else (f"1 client produces {args.rate:,.0f} records/s")
    )
    print(
        f"\n2. lag while {how} (acks=1, {BATCH}-record Arrow bodies) for {load.seconds:.0f}s; "
        f"segments of {lg.segment_mb} MiB; one `tierlog tiering` process; {len(samples)} samples"
    )
    print(f"{'lag':<36} {'p50':>10} {'max':>10} {'at end':>10}")
    print(_row("sealed segments not tiered", [s.sealed_segments for s in samples], final[1]))
    print(_row("records in them", [s.sealed_records for s in samples], final[2]))
    print(_row("describe tiering_lag (+ active seg)", [s.describe_lag for s in samples], final[3]))
    quarters = (
        [samples[int(q * (len(samples) - 1))] for q in (0.25, 0.5, 0.75, 1)] if samples else []
    )
    print(
        "   sealed segments behind: "
        + ", ".join(f"{s.sealed_segments} at {s.t:.0f}s" for s in quarters)
    )
    print(
        f"   produce {produce_rate:,.0f} records/s ({load.mb_per_s:.1f} MB/s, {load.errors} "
        f"errors); tiered meanwhile {lg.tiered_during / load.seconds:,.0f} records/s; "
        f"capacity of one worker (1.) {tp.records_per_s / produce_rate:.2f}x produce"
    )
    if lg.drain_s is not None:
        drain = f"drained {lg.drain_s:.1f}s after produce stopped"
    else:
        drain = (
            f"{lg.left_after_drain:,} sealed records left {args.drain_s:.0f}s after produce stopped"
        )
    print(
        f"   kept up: {'yes' if kept_up else 'NO'} (= at most 2 sealed segments behind at the "
        f"end and capacity >= produce rate); {drain}"
    )

    raw, hot, cold = tp.raw_bytes, tp.hot_bytes, tp.parquet_bytes
    print("\n3. cold size (the segments of 1.)")
    print(f"{'raw record bytes (key+value)':<30} {raw / MB:>8.1f} MB")
    print(f"{'hot segment bytes':<30} {hot / MB:>8.1f} MB  {hot / raw:.3f}x raw")
    ratio = f"{cold / raw:.3f}x raw ({raw / cold:.1f}:1)"
    print(f"{'Parquet (zstd) bytes':<30} {cold / MB:>8.1f} MB  {ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--segments", type=int, default=24)
    parser.add_argument("--segment-mb", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--lag-segment-mb", type=int, default=8)
    parser.add_argument("--drain-s", type=float, default=60, help="longest wait for the drain")
    parser.add_argument(
        "--rate", type=float, default=0, help="produce records/s in 2. (default: full speed)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp, MotoServer() as moto:
        os.chmod(tmp, 0o755)  # as root, Postgres runs as the postgres user
        pg = LocalPostgres(Path(tmp) / "pg", fast=True)
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
        os.environ.update(s3_env)  # the broker reads cold data from the same bucket
        broker = BrokerProcess(url, Path(tmp) / "broker")
        engine = make_engine(url)
        try:
            broker.start()
            env = BenchEnv(url, config, s3_env, broker, Path(tmp))
            tp = throughput(env, engine, args.segments, args.segment_mb, args.value_bytes)
            lg = lag(
                env,
                engine,
                args.seconds,
                args.clients,
                args.lag_segment_mb,
                args.value_bytes,
                args.drain_s,
                args.rate,
            )
        finally:
            broker.stop()
            engine.dispose()
            pg.stop()
    report(tp, lg, args)


if __name__ == "__main__":
    main()
