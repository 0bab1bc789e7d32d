"""The results of bench.tiering, their checks and their table."""

from __future__ import annotations

import argparse
import os
from typing import Any, NamedTuple

from bench.load import LoadResult
from coldstore.delta_table import CHECKPOINT_INTERVAL, DeltaTopicTable
from coldstore.layout import table_uri
from coldstore.object_store import ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.types import TopicIdPartition

MB = 1e6
MiB = 1 << 20
BATCH = 500  # records per produce request (~0.5 MB bodies)


class Throughput(NamedTuple):
    segments: int
    records: int
    raw_bytes: int
    hot_bytes: int
    parquet_bytes: int
    seconds: float
    steps: dict[str, float]
    commits: int  # Delta commits that added the files

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def commit_share(self) -> float:
        return self.steps.get("Delta commit", 0.0) / self.seconds


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


def check_tiered(
    engine: Any, config: ObjectStoreConfig, topic: str, tid: str, partitions: int
) -> int:
    """Every tiered record exactly once: per partition, the manifest's files tile [0, end)
    without gap or overlap, and the Delta table holds the same files and records. Returns
    the records tiered."""
    table = DeltaTopicTable(table_uri(config, topic), config.storage_options(), topic=topic)
    in_table = table.files()
    total = 0
    for p in range(partitions):
        files = ColdManifest(engine).files(TopicIdPartition(tid, p))
        expect = 0
        for f in files:
            if f.base_offset != expect or f.records != f.last_offset - f.base_offset + 1:
                raise SystemExit(f"{topic}-{p}: file {f.object_key} at {f.base_offset}, {expect=}")
            expect = f.last_offset + 1
        delta = [f for f in in_table if f.partition == p]
        in_delta = sum(f.records or 0 for f in delta)
        if len(delta) != len(files) or in_delta != expect:
            raise SystemExit(
                f"{topic}-{p}: Delta holds {len(delta)} files, {in_delta:,} records; the "
                f"manifest {len(files)} files, {expect:,} records"
            )
        total += expect
    return total


def _pct(xs: list[int], q: float) -> int:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0


def _row(name: str, xs: list[int], last: int) -> str:
    return f"{name:<36} {_pct(xs, 0.5):>10,} {max(xs, default=0):>10,} {last:>10,}"


def report(base: Throughput, tp: Throughput, lg: Lag, args: argparse.Namespace) -> None:
    print(
        f"tierlog tiering benchmark: 1 broker, moto S3 (in memory), ~{args.value_bytes} B JSON "
        f"values with user-id keys, {os.cpu_count()} cores shared by broker, worker, S3, "
        f"Postgres and clients"
    )
    print(
        f"\n1. one worker tiering {tp.segments} sealed segments of {args.partitions} partitions "
        f"(segment.bytes {args.segment_mb} MiB, {tp.hot_bytes / tp.segments / MiB:.2f} MiB each "
        f"on average: a request's frame never spans two)"
    )
    print(
        f"   settings: batches of up to {args.batch_segments} segments / {args.batch_mb} MiB "
        f"per Delta commit (runs of segments per partition), {args.upload_threads} upload "
        f"threads, {args.encode_threads} encoder threads, Delta checkpoint every "
        f"{CHECKPOINT_INTERVAL} commits"
    )
    print(
        f"{'case':<22}{'records':>10} {'seconds':>8} {'records/s':>11} {'raw MB/s':>9} "
        f"{'Parquet MB/s':>13} {'s/segment':>10} {'commits':>8} {'commit %':>9} {'vs base':>8}"
    )
    for name, t in (("1 segment per commit", base), ("batched", tp)):
        print(
            f"{name:<22}{t.records:>10,} {t.seconds:>8.2f} {t.records_per_s:>11,.0f} "
            f"{t.raw_bytes / MB / t.seconds:>9.1f} {t.parquet_bytes / MB / t.seconds:>13.1f} "
            f"{t.seconds / t.segments:>10.3f} {t.commits:>8} {t.commit_share:>8.0%} "
            f"{t.raw_bytes / t.seconds / (base.raw_bytes / base.seconds):>7.2f}x"
        )
    for name, t in (("baseline", base), ("batched", tp)):
        steps = sorted(t.steps.items(), key=lambda kv: -kv[1])
        print(
            f"   {name} time per step: "
            + ", ".join(f"{n} {100 * s / t.seconds:.0f}%" for n, s in steps)
        )
    print(
        "   (downloads and uploads run on their own threads: only the waits are on the "
        f"worker's path); batched: {tp.segments / max(1, tp.commits):.1f} files per commit"
    )

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
