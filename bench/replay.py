"""Replay from the cold tier through the fetch API, against the raw limit of the S3 endpoint.

    .venv/bin/python -m bench.replay [--records 1500000] [--value-bytes 100] [--segment-mb 32]
                                     [--seconds 8] [--concurrency 8]
    .venv/bin/python -m bench.replay --smoke       # 20,000 records, 1 MiB segments (the tests)

Starts its own Postgres, a SeaweedFS S3 endpoint (on disk), one broker and one `tierlog fetch`
node on loopback; produces a deterministic topic with the Arrow fast path, tiers it (a tiering
worker in this process) until only the active segment is hot, then prints in one run:

- the raw limit: concurrent ranged GETs of the very same objects, no decoding (MB/s);
- replay throughput from offset 0 to the cold end through the fetch API (Arrow), from the fetch
  node and from the broker (records/s, MB/s of Parquet objects read), and GETs per GB;
- produce p99 latency alone, and during a full-speed replay (through the node, through the
  broker), with the ratio.

The issue's goals: replay >= 70% of the raw limit; <= 128 GETs per GB; produce p99 during a
replay within 1.5x of alone. The caches are made smaller than the data so repeated replays keep
reading S3.

Every pass of every replay (timed or not, and those run beside the produce load) is checked
(bench/replay_check.py): offsets dense from 0 to the cold end, and a checksum of the values
equal to the one computed while producing them; a mismatch ends the benchmark with exit
status 1 and says where. The first pass through each server is also compared record by
record (offsets, keys, values). Each replay row reports the cold caches' hit rates over its
timed pass (range cache, decoded row groups, the share of prefetched bytes used).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from bench.load import LoadResult, run_load
from bench.replay_check import PassCheck, ProducedDigests, ReplayMismatch
from bench.replay_cpu import CpuSplit, ReplayCpu, cpu_table
from bench.replay_probes import cache_counters, cache_rates, metric, raw_limit
from bench.servers import BenchPostgres, start_pg_and_s3
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.types import TopicIdPartition
from tests.integration.brokers import BrokerProcess
from tests.integration.fetch_nodes import FetchNodeProcess
from tests.integration.replay_data import arrow_body, records
from tiering.worker import TieringWorker
from tierlog.devstack.local_s3 import LocalS3

ARROW = "application/vnd.apache.arrow.stream"
MiB = 1 << 20


class Replay:
    """A consumer reading [0, end) as fast as it can: Arrow, sequential, one keep-alive
    connection (the stdlib client: httpx's pure-Python body reading would be the bottleneck
    at hundreds of MB/s)."""

    def __init__(
        self, name: str, url: str, end: int, produced: ProducedDigests, nice: int = 0
    ) -> None:
        self.name = name
        self.nice = nice
        parsed = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=120)
        self.end = end
        self.produced = produced
        self.value_bytes = 0  # > 0: also compare each answer record by record
        self.stop = threading.Event()
        self.records = 0
        self.passes = 0
        self.error: ReplayMismatch | None = None
        self.started = time.perf_counter()

    def once(self) -> tuple[float, int, int]:
        """(seconds, records, response bytes) of one whole pass, checked (ReplayMismatch)."""
        offset, got, nbytes = 0, 0, 0
        check = PassCheck(f"{self.name}, pass {self.passes + 1}", 0, self.end, self.produced)
        started = time.perf_counter()
        while offset < self.end:
            path = (
                f"/topics/replay/partitions/0/records?offset={offset}"
                f"&max_records=100000&max_bytes={16 * MiB}"
            )
            self.conn.request("GET", path, headers={"accept": ARROW})
            resp = self.conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"fetch failed: {resp.status} {body[:300]!r}")
            nxt = check.answer(
                pa.ipc.open_stream(body).read_all(),
                offset,
                int(resp.headers["x-tierlog-next-offset"]),
            )
            if self.value_bytes:
                _verify(body, offset, nxt, self.value_bytes)
            got += nxt - offset
            self.records += nxt - offset
            nbytes += len(body)
            offset = nxt
        check.finish()
        self.passes += 1
        return time.perf_counter() - started, got, nbytes

    def rate(self) -> float:
        return self.records / (time.perf_counter() - self.started)

    def loop(self) -> None:
        if self.nice:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
        self.started = time.perf_counter()
        self.records = 0
        try:
            while not self.stop.is_set():  # a pass once begun runs to the end: all are checked
                self.once()
        except ReplayMismatch as exc:
            self.error = exc


def _verify(body: bytes, lo: int, hi: int, value_bytes: int) -> None:
    """The answer to a fetch at `lo` holds exactly the records produced at lo..hi-1."""
    got = pa.ipc.open_stream(body).read_all()
    got = got.filter(pa.compute.less(got.column("offset"), hi))
    want = records(lo, hi, value_bytes)
    offsets = got.column("offset").to_numpy()
    same = np.array_equal(offsets, np.arange(lo, hi)) and all(
        got.column(c).combine_chunks().equals(want.column(c).combine_chunks())
        for c in ("key", "value")
    )
    if not same:
        raise ReplayMismatch(f"replay answer at offset {lo} differs from the records produced")


def produce_p99(port: int, seconds: float) -> LoadResult:
    body = arrow_body(records(0, 100, 100))
    path = "/topics/load/records?acks=1"
    return run_load(port, path, body, ARROW, 100, 2, seconds)


def setup(args: argparse.Namespace, tmp: Path) -> tuple[BenchPostgres, LocalS3, str]:
    pg, url, s3, s3_env = start_pg_and_s3(tmp, fast=args.smoke)  # durability: full runs only
    os.environ.update(s3_env)
    os.environ["TIERLOG_S3_BUCKET"] = "bench"
    # Caches well below the data, so every replay pass reads S3 again.
    os.environ["TIERLOG_COLD_CACHE_MB"] = str(args.cache_mb)
    os.environ["TIERLOG_COLD_DECODED_MB"] = str(args.cache_mb // 2)
    ObjectStore(ObjectStoreConfig.from_env(os.environ)).ensure_bucket()
    return pg, s3, url


def load_topic(
    args: argparse.Namespace, broker: BrokerProcess, url: str, produced: ProducedDigests
) -> tuple[int, list[tuple[str, int]]]:
    """Produce and tier the replay topic (digests of its values in `produced`); (cold end,
    [(key, size)] of its files)."""
    tid = broker.create_topic(
        "replay",
        segment_bytes=args.segment_mb * MiB,
        local_retention_ms=1000,
        max_message_bytes=64 * MiB,
    )["id"]
    broker.create_topic("load")
    # A request is one frame, and a frame never spans segments: at most a quarter of a segment
    # per request, or a small topic is one active segment that never seals (nor tiers).
    step = max(1, min(50_000, args.segment_mb * MiB // (4 * (args.value_bytes + 8))))
    for lo in range(0, args.records, step):
        table = records(lo, min(lo + step, args.records), args.value_bytes)
        body = arrow_body(table)
        for _ in range(10):  # a retriable 503 (a lease renewal late on a loaded machine)
            r = broker.http.post(
                "/topics/replay/records",
                params={"acks": "1"},
                content=body,
                headers={"content-type": ARROW},
            )
            if r.status_code != 503:
                break
            time.sleep(0.5)
        if r.status_code != 200:
            raise RuntimeError(f"produce failed: {r.status_code} {r.text}")
        produced.produced(table.column("value"))
    engine = make_engine(url)
    manifest = ColdManifest(engine)
    worker = TieringWorker(engine, ObjectStoreConfig.from_env(os.environ), "bench-worker")
    try:
        deadline = time.monotonic() + 600
        while True:
            worker.run_once()
            segs = worker.registry.segments(TopicIdPartition(tid, 0))
            if segs and all(s.state == "tiered" for s in segs) and len(segs) >= 2:
                p = broker.http.get("/topics/replay").json()["partitions"][0]
                if p["hot"]["start"] == p["cold"]["end"]:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"not tiered and deleted from the hot tier in 600 s: {segs}")
            time.sleep(0.2)
        files = manifest.files(TopicIdPartition(tid, 0))
        return files[-1].last_offset + 1, [(f.object_key, f.size_bytes) for f in files]
    finally:
        worker.close()
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_500_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--segment-mb", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--cache-mb", type=int, default=64)
    parser.add_argument("--smoke", action="store_true", help="20,000 records, 1 MiB segments")
    args = parser.parse_args()
    if args.smoke:
        args.records, args.segment_mb, args.seconds = 20_000, 1, 0.5
        args.concurrency, args.cache_mb = 2, 2
    produced = ProducedDigests()
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp_name:
        tmp = Path(tmp_name)
        os.chmod(tmp, 0o755)
        pg, s3, url = setup(args, tmp)
        # The broker and the fetch node start side by side, both ready before anything runs.
        broker = BrokerProcess(url, tmp / "broker").start(wait=False)
        node = FetchNodeProcess(url, tmp / "fetch.log", {})
        try:
            node.launch()
            broker.wait_ready()
            node.wait_ready()
            cold_end, files = load_topic(args, broker, url, produced)
            run = Run(args, broker, node, s3.proc.pid if s3.proc else 0, cold_end, produced)
            replay_table(run, files)
            produce_table(run)
        except ReplayMismatch as exc:
            raise SystemExit(f"replay check failed: {exc}") from None
        finally:
            node.stop()
            broker.stop()
            s3.stop()
            pg.stop()
    print(f"every replay pass checked: {passes_checked} (offsets dense, values' checksum)")


passes_checked = 0  # whole passes checked, over every replay


class Run(NamedTuple):
    args: argparse.Namespace
    broker: BrokerProcess
    node: FetchNodeProcess
    s3_pid: int
    cold_end: int
    produced: ProducedDigests


def replay_table(run: Run, files: list[tuple[str, int]]) -> None:
    args, broker, node, cold_end = run.args, run.broker, run.node, run.cold_end
    cold_bytes = sum(size for _, size in files)
    hw = broker.http.get("/topics/replay").json()["partitions"][0]["high_watermark"]
    print(
        f"tierlog replay benchmark: {hw:,} records of ~{args.value_bytes} B values; "
        f"{cold_end:,} only in S3 ({cold_end / hw:.0%}) in {len(files)} Parquet files, "
        f"{cold_bytes / 1e6:.1f} MB; S3 = SeaweedFS on loopback; {os.cpu_count()} cores "
        f"shared by every process; caches {args.cache_mb} MiB"
    )
    with ReplayCpu(run.s3_pid, None) as raw_cpu:
        raws = [raw_limit(files, args.concurrency, 16 * MiB) for _ in range(2)]
    raw_s, raw_b, raw_n = min(raws)
    cpu: list[tuple[str, CpuSplit, int]] = [("raw GETs (both runs)", raw_cpu.split, 2 * raw_b)]
    raw_mb = raw_b / raw_s / 1e6
    raw_name = f"raw: {args.concurrency} concurrent 16 MiB GETs"
    print(
        f"\n{'case':<34} {'records/s':>11} {'MB/s':>8} {'GETs/GB':>8} {'vs raw':>7}"
        f" {'range hit':>9} {'rg hit':>7} {'pf used':>7}"
    )
    print(f"{raw_name:<34} {'-':>11} {raw_mb:>8.1f} {raw_n / (raw_b / 1e9):>8.0f} {'-':>7}")
    servers = (
        ("replay via fetch node", node.http, node.proc.pid if node.proc else None),
        ("replay via broker", broker.http, broker.proc.pid if broker.proc else None),
    )
    for name, target, pid in servers:
        gets0 = metric(target, "tierlog_cold_get_requests_total")
        bytes0 = metric(target, "tierlog_cold_read_bytes_total")
        consumer = Replay(name, str(target.base_url), cold_end, run.produced)
        consumer.value_bytes = args.value_bytes  # the first pass: also record by record
        consumer.once()
        consumer.value_bytes = 0
        caches0 = cache_counters(target)
        with ReplayCpu(run.s3_pid, pid) as meter:
            secs, got, _ = consumer.once()  # caches < data: every byte comes from S3 again
        cpu.append((name, meter.split, cold_bytes))
        hits = cache_rates(caches0, cache_counters(target))
        _count(consumer)
        gets = metric(target, "tierlog_cold_get_requests_total") - gets0
        read = metric(target, "tierlog_cold_read_bytes_total") - bytes0
        mbs = cold_bytes / secs / 1e6
        print(
            f"{name:<34} {got / secs:>11,.0f} {mbs:>8.1f} {gets / (read / 1e9):>8.0f} "
            f"{mbs / raw_mb:>7.0%} {_pct(hits[0]):>9} {_pct(hits[1]):>7} {_pct(hits[2]):>7}"
        )
    print(
        "(second of two passes from offset 0 to the cold end, both checked; MB/s: Parquet bytes "
        "of the cold files per second; GETs/GB: per GB read from S3, both passes; range hit, "
        "rg hit: range-cache and decoded-row-group lookups answered from memory, pf used: "
        "prefetched bytes later read, all over the timed pass)"
    )
    cpu_table(cpu)


def _pct(x: float) -> str:
    return "-" if x != x else f"{x:.0%}"  # NaN: no lookups (or no prefetch) to rate


def _count(replay: Replay) -> None:
    global passes_checked
    passes_checked += replay.passes


def produce_table(run: Run) -> None:
    args, broker, node, cold_end = run.args, run.broker, run.node, run.cold_end
    produce_p99(broker.port, min(2, args.seconds))  # warm-up
    alone = produce_p99(broker.port, args.seconds)
    head = "produce (100 records/request, 2 clients)"
    print(f"\n{head:<56} {'p50 ms':>7} {'p99 ms':>7} {'ratio':>6}")
    print(f"{'alone':<56} {alone.pct(0.5):>7.2f} {alone.pct(0.99):>7.2f} {'1.00':>6}")
    # First as they are: every process at the same priority on the same two cores. Then with
    # what production runs on other hosts (the consumer, the S3 endpoint, and the fetch node
    # when it serves the replay) at nice 10: the broker's share of the CPU is then what it
    # would have on its own host, and what remains is the cost of the replay to the broker.
    servers = (("fetch node", node.url), ("broker", broker.url))
    phases = [(niced, server) for niced in (False, True) for server in servers]
    if args.smoke:  # each code path once: a replay via each server, the renice and nice
        phases = [(False, servers[0]), (True, servers[1])]
    for niced, (server, url) in phases:
        if niced:  # idempotent: renicing again in the next phase changes nothing
            renice(run.s3_pid, NICE)
            renice(node.proc.pid if node.proc else 0, NICE)
        label = f"during a full-speed replay via {server}" + (" (others niced)" if niced else "")
        replay = Replay(label, url, cold_end, run.produced, nice=NICE if niced else 0)
        thread = threading.Thread(target=replay.loop, daemon=True)
        thread.start()
        time.sleep(min(1.0, args.seconds / 4))  # the replay under way before the measure
        during = produce_p99(broker.port, args.seconds)
        rate = replay.rate()
        replay.stop.set()
        thread.join()  # after the pass under way: it is checked to its end too
        if replay.error is not None:
            raise replay.error
        _count(replay)
        ratio = during.pct(0.99) / alone.pct(0.99)
        print(
            f"{label:<56} {during.pct(0.5):>7.2f} {during.pct(0.99):>7.2f} {ratio:>6.2f}"
            f"   (replay meanwhile: {rate:,.0f} records/s, {replay.passes} passes checked)"
        )
    print("\ngoals: replay >= 70% of raw; <= 128 GETs/GB; produce p99 during replay <= 1.5x alone")


NICE = 10


def renice(pid: int, nice: int) -> None:
    """Every thread of a process (Linux nice values are per thread)."""
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, int(task.name), nice)


if __name__ == "__main__":
    main()
