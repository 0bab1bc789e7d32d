"""Tiering: one worker's throughput, its lag under full-speed produce, cold size vs raw.

    .venv/bin/python -m bench.tiering [--segments 24] [--segment-mb 8] [--value-bytes 1024]
                                      [--partitions 8] [--batch-segments 16] [--batch-mb 1024]
                                      [--upload-threads 2] [--encode-threads 1]
                                      [--seconds 20] [--clients 3]
                                      [--lag-segment-mb 8]
    .venv/bin/python -m bench.tiering --smoke      # 1 MiB segments, 2 s at 2,000 records/s

Starts its own Postgres, moto's S3 server (in memory, on loopback: the figures are the
worker's CPU and protocol cost, not a network's) and one real broker; records are ~1 KB JSON
events (distinct, of realistic compressibility) keyed by user id. In one run:

1. throughput: produce --segments sealed segments of --segment-mb across --partitions, then
   time one tiering worker (in this process, batches of --batch-segments / --batch-mb per
   Delta commit, --upload-threads, --encode-threads) tiering all of them, against a baseline
   measured first in the same run (the same records on a second topic, one segment per
   commit, one upload thread: the scheme before batches): records/s, MB/s of raw record bytes
   (key + value, summed from the tiered files) and of Parquet written, where the time goes
   per step, and the Delta commits it made (files per commit, their share of the time);
2. lag: a `tierlog tiering` process runs while --clients processes produce at full speed
   (acks=1) for --seconds; the lag (sealed segments and records not yet tiered, and describe's
   tiering_lag, which includes the active segment) is sampled twice a second; then how long
   the worker takes to drain it once produce stops;
3. cold size: Parquet bytes against raw record bytes and against the hot segment bytes.

Both topics are checked after their phase: the cold files tile the offsets from 0 without gap
or overlap, and the Delta table holds the same files and records (exactly once).
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

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.events import arrow_body, make_records
from bench.load import LoadResult, run_load
from bench.servers import bench_postgres
from bench.tiering_report import BATCH, Lag, Sample, Throughput, check_tiered, report
from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.segment_registry import SegmentRegistry
from metadata.types import TopicIdPartition
from tests.integration.brokers import BrokerProcess
from tests.integration.s3 import MotoServer, config_for
from tiering.batch import BatchSettings
from tiering.worker import TieringWorker

ARROW = "application/vnd.apache.arrow.stream"
MiB = 1 << 20


class BenchEnv(NamedTuple):
    url: str  # Postgres
    config: ObjectStoreConfig
    s3_env: dict[str, str]
    broker: BrokerProcess
    tmp: Path


def _create(env: BenchEnv, name: str, segment_mb: int, partitions: int) -> str:
    doc = env.broker.create_topic(name, partitions, segment_bytes=segment_mb * MiB)
    return str(doc["id"])


def _sealed(engine: Any, tid: str, partitions: int) -> int:
    reg = SegmentRegistry(engine)
    return sum(len(reg.segments(TopicIdPartition(tid, p))) for p in range(partitions))


# -- 1. throughput ---------------------------------------------------------------------------


# The worker's steps that run on its own thread, one after another (the uploads overlap them).
SERIAL_STEPS = (
    "waiting for encoding",
    "waiting for uploads",
    "Delta commit",
    "manifest commit",
)


def throughput(
    env: BenchEnv, engine: Any, args: argparse.Namespace, batch: BatchSettings, topic: str
) -> Throughput:
    tid = _create(env, topic, args.segment_mb, args.partitions)
    rng = random.Random(1)
    produced = 0
    http = httpx.Client(base_url=env.broker.url, timeout=60)
    while _sealed(engine, tid, args.partitions) < args.segments:
        keys, values = make_records(rng, BATCH, args.value_bytes)
        r = http.post(
            f"/topics/{topic}/records?acks=1",
            content=arrow_body(keys, values),
            headers={"content-type": ARROW},
        )
        r.raise_for_status()
        produced += sum(len(k) + len(v) for k, v in zip(keys, values, strict=True))
        if produced > (args.segments + args.partitions) * args.segment_mb * MiB * 1.2:
            time.sleep(0.1)  # all produced: wait for the broker to register the seals
    http.close()

    worker = TieringWorker(engine, env.config, f"bench-{topic}", batch=batch)
    # Creating the table is a one-off, not per-segment cost.
    table = DeltaTopicTable(table_uri(env.config, topic), env.config.storage_options())
    table.ensure_created()
    created = table.version()
    started = time.perf_counter()
    while worker.run_once():
        pass
    seconds = time.perf_counter() - started
    worker.close()
    steps = dict(worker.step_seconds)
    steps["claims, leases, temp files"] = seconds - sum(steps.get(n, 0.0) for n in SERIAL_STEPS)

    check_tiered(engine, env.config, topic, tid, args.partitions)
    manifest, registry = ColdManifest(engine), SegmentRegistry(engine)
    tps = [TopicIdPartition(tid, p) for p in range(args.partitions)]
    files = [f for tp in tps for f in manifest.files(tp)]
    segs = [s for tp in tps for s in registry.segments(tp) if s.state == "tiered"]
    return Throughput(
        segments=len(files),
        records=sum(f.records for f in files),
        raw_bytes=raw_bytes(env.config, [f.object_key for f in files]),
        hot_bytes=sum(s.size_bytes for s in segs),
        parquet_bytes=sum(f.size_bytes for f in files),
        seconds=seconds,
        steps=steps,
        commits=table.version() - created,
    )


def raw_bytes(config: ObjectStoreConfig, keys: list[str]) -> int:
    """Key + value bytes of the tiered records, read back from their files (after timing)."""
    store = ObjectStore(config)
    total = 0
    for key in keys:
        t = pq.read_table(pa.BufferReader(store.get(key)), columns=["key", "value"])
        for col in ("key", "value"):
            total += pc.sum(pc.binary_length(t.column(col))).as_py() or 0
    store.close()
    return total


# -- 2. lag under steady produce -------------------------------------------------------------


def _sample(engine: Any, http: httpx.Client, t0: float) -> Sample:
    rows = [u for u in SegmentRegistry(engine).untiered() if u.topic == "steady"]
    doc = http.get("/topics/steady").json()
    return Sample(
        time.monotonic() - t0,
        sum(u.segments for u in rows),
        sum(u.records for u in rows),
        sum(int(p["tiering_lag"] or 0) for p in doc["partitions"]),
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


def lag(env: BenchEnv, engine: Any, args: argparse.Namespace) -> Lag:
    seconds, clients, rate = args.seconds, args.clients, args.rate
    tid = _create(env, "steady", args.lag_segment_mb, args.partitions)
    keys, values = make_records(random.Random(2), BATCH, args.value_bytes)
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
        tiered_during = sum(
            manifest.tiered_end_offset(TopicIdPartition(tid, p)) or 0
            for p in range(args.partitions)
        )
        stopped = time.monotonic()
        drain_s: float | None = None
        while True:
            last = _sample(engine, http, t0)
            if last.sealed_segments == 0:
                drain_s = time.monotonic() - stopped
                break
            if time.monotonic() - stopped > args.drain_s:
                break
            time.sleep(0.2)
    finally:
        http.close()
        worker.terminate()
        worker.wait(30)
        log.close()
    check_tiered(engine, env.config, "steady", tid, args.partitions)
    return Lag(result[0], samples, tiered_during, drain_s, last.sealed_records, args.lag_segment_mb)


# -- the run ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--segments", type=int, default=24)
    parser.add_argument("--segment-mb", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=8, help="of both topics")
    defaults = BatchSettings()
    parser.add_argument("--batch-segments", type=int, default=defaults.max_segments)
    parser.add_argument("--batch-mb", type=int, default=defaults.max_bytes // MiB)
    parser.add_argument("--upload-threads", type=int, default=defaults.upload_threads)
    parser.add_argument("--encode-threads", type=int, default=defaults.encode_threads)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--lag-segment-mb", type=int, default=8)
    parser.add_argument("--drain-s", type=float, default=60, help="longest wait for the drain")
    parser.add_argument(
        "--rate", type=float, default=0, help="produce records/s in 2. (default: full speed)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes; 2. must drain")
    args = parser.parse_args()
    if args.smoke:
        args.segments, args.segment_mb, args.lag_segment_mb = 4, 1, 1
        args.partitions = 2
        args.seconds, args.rate, args.drain_s = 2, 2000, 30
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
        os.environ.update(s3_env)  # the broker reads cold data from the same bucket
        broker = BrokerProcess(url, Path(tmp) / "broker")
        engine = make_engine(url)
        try:
            broker.start()
            env = BenchEnv(url, config, s3_env, broker, Path(tmp))
            batch = BatchSettings(
                args.batch_segments, args.batch_mb * MiB, args.upload_threads, args.encode_threads
            )
            # The baseline, in the same run: the same records, one segment per Delta commit
            # and no upload overlap (the scheme before batches).
            base = throughput(env, engine, args, BatchSettings(1, batch.max_bytes, 1, 1), "single")
            tp = throughput(env, engine, args, batch, "bulk")
            lg = lag(env, engine, args)
            if args.smoke and lg.drain_s is None:
                raise SystemExit(f"2. did not drain in {args.drain_s:g} s: {lg.left_after_drain}")
        finally:
            broker.stop()
            engine.dispose()
            pg.stop()
    report(base, tp, lg, args)


if __name__ == "__main__":
    main()
