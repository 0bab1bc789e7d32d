"""Compaction throughput: small-file merge, key compaction, retention + sweep.

    .venv/bin/python -m bench.compaction [--files 64] [--records 2000] [--keys 1000]
    .venv/bin/python -m bench.compaction --smoke   # 8 files of 200 records (the test suite)

Starts its own Postgres and moto's S3 server (in memory, loopback: the figures are the
worker's CPU and protocol cost, not a network's). Tiers the data through the tiering
protocol (tests/integration/test_compaction_support.py), then times one compaction pass per
job. Prints a table: files/s and MB/s of input for the merge, records/s for key compaction,
bytes reclaimed for each. The last row is the brokers' log cleaner (hot-tier key compaction
of sealed segments on local disk, ingest/cleaner/log_cleaner.py) over the same workload.
Each job is checked: the merge leaves fewer files, key compaction keeps one record per key,
retention expires every file.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.databases import new_database
from bench.servers import bench_postgres
from coldstore.object_store import ObjectStore
from compaction.worker import PassSummary
from metadata.db import make_engine, migrate
from metadata.types import TopicIdPartition
from tests.integration.s3 import MotoServer, config_for
from tests.integration.test_compaction_support import ColdEnv, now_ms

MB = 1e6


def _tier(env: ColdEnv, topic: str, files: int, records: int, keys: int) -> int:
    """`files` files of `records` ~200-byte records over `keys` keys; returns the bytes."""
    now, offset = now_ms(), 0
    for _ in range(files):
        recs = []
        for _i in range(records):
            recs.append(
                {
                    "key": f"key-{offset % keys:06d}".encode(),
                    "value": os.urandom(100) + f"value {offset}".encode() * 6,
                    "headers": None,
                    "ts": now - 3_600_000 + offset,
                }
            )
            offset += 1
        env.tier(topic, 0, recs, per_frame=500)
    return sum(f.size_bytes for f in env.manifest.files(TopicIdPartition(env.ids[topic], 0)))


def _one_pass(env: ColdEnv, **settings: Any) -> tuple[PassSummary, float]:
    """One pass of a new compaction worker with these settings, and how long it took."""
    w = env.worker(**settings)
    try:
        started = time.monotonic()
        summary = w.run_once()
        return summary, time.monotonic() - started
    finally:
        w.close()


def _hot_clean(tmp: str, n_records: int, keys: int) -> tuple[str, str, str, str]:
    """The brokers' log cleaner on a local partition log of `n_records` updates."""
    import pyarrow as pa

    from ingest.cleaner.log_cleaner import LogCleaner
    from ingest.log.index import LogIndex
    from ingest.log.local_log import LocalLog, LogConfig
    from logformat.frame import encode_frame
    from logformat.schema import HEADERS, RECORD_SCHEMA, TIMESTAMP
    from metadata.configs import topic_config

    index = LogIndex(os.path.join(tmp, "hot-index"))
    plog = LocalLog.open(
        os.path.join(tmp, "hot-0"), "hot", "hot", 0, index, LogConfig(segment_bytes=8 << 20)
    )
    per_frame, ts = 500, now_ms() - 60_000
    for start in range(0, n_records, per_frame):
        n = min(per_frame, n_records - start)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(range(n), pa.int32()),
                pa.array([ts] * n, TIMESTAMP),
                pa.array([b"key-%d" % ((start + i) % keys) for i in range(n)], pa.binary()),
                pa.array([b"v" * 100] * n, pa.binary()),
                pa.array([None] * n, HEADERS),
            ],
            schema=RECORD_SCHEMA,
        )
        plog.append([encode_frame(batch)], 0, now_ms())
    plog.roll()
    cfg = topic_config({"cleanup.policy": "compact", "remote.storage.enable": "false"})
    started = time.monotonic()
    r = LogCleaner().clean(plog, cfg, plog.log_end_offset, force=True)
    dt = time.monotonic() - started
    plog.close()
    index.close()
    if r is None or r.records_out != keys:
        raise SystemExit(f"hot log cleaner kept {r and r.records_out} records of {keys} keys")
    return (
        "hot log cleaner",
        f"{r.records_in:,} → {r.records_out:,} records, {r.segments_in} → {r.segments_out} "
        f"segments in {dt:.2f}s",
        f"{r.records_in / dt:,.0f} records/s, {r.bytes_in / MB / dt:,.1f} MB/s",
        f"{(r.bytes_in - r.bytes_out) / MB:,.2f} MB of {r.bytes_in / MB:,.2f} MB",
    )


def _check(job: str, ok: bool, summary: PassSummary) -> None:
    if not ok:
        raise SystemExit(f"{job} did not do its work: {summary}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true", help="8 files of 200 records, 50 keys")
    args = parser.parse_args()
    if args.smoke:
        args.files, args.records, args.keys = 8, 200, 50
    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp, MotoServer() as moto:
        os.chmod(tmp, 0o755)
        pg = bench_postgres(Path(tmp) / "pg", fast=True)
        url = pg.start()
        try:
            engine = make_engine(new_database(url, "compaction"))
            migrate(engine)
            config = config_for(moto.endpoint, "bench")
            ObjectStore(config).ensure_bucket()
            env = ColdEnv(engine, config)
            n_records = args.files * args.records

            # 1. small-file merge: every file is far below the target
            env.topic("merge", 1, **{"retention.ms": "-1", "file.delete.delay.ms": "0"})
            size = _tier(env, "merge", args.files, args.records, args.records * args.files)
            target = size // 4 + 1
            s, dt = _one_pass(env, target_file_bytes=target, merge_min_files=2)
            after = env.manifest.files(TopicIdPartition(env.ids["merge"], 0))
            _check("merge", s.merged_files > 0 and len(after) < args.files, s)
            rows.append(
                (
                    "merge",
                    f"{s.merged_files} of {args.files} files merged, {len(after)} left, {dt:.2f}s",
                    f"{s.merged_files / dt:,.0f} files/s, {size / MB / dt:,.1f} MB/s",
                    f"{len(after)} files of ~{target / MB:.1f} MB (dataChange=false)",
                )
            )

            # 2. key compaction: `keys` keys updated over and over
            env.topic("table", 1, **{"cleanup.policy": "compact", "min.compaction.lag.ms": "0"})
            size = _tier(env, "table", args.files, args.records, args.keys)
            s, dt = _one_pass(env, target_file_bytes=64 << 20)
            kept = env.manifest.files(TopicIdPartition(env.ids["table"], 0))
            left = sum(f.size_bytes for f in kept)
            _check("key compaction", sum(f.records for f in kept) == args.keys, s)
            rows.append(
                (
                    "key compaction",
                    f"{n_records:,} → {sum(f.records for f in kept):,} records in {dt:.2f}s",
                    f"{n_records / dt:,.0f} records/s, {size / MB / dt:,.1f} MB/s",
                    f"{(size - left) / MB:,.2f} MB of {size / MB:,.2f} MB",
                )
            )

            # 3. retention by time + the sweep after the grace period
            env.topic("old", 1, **{"retention.ms": "1000", "file.delete.delay.ms": "0"})
            size = _tier(env, "old", args.files, args.records, args.keys)
            s, dt = _one_pass(env)
            _check("retention", s.expired_files == args.files, s)
            rows.append(
                (
                    "retention + sweep",
                    f"{s.expired_files} files expired, {s.deleted_objects} objects deleted "
                    f"in {dt:.2f}s",
                    f"{s.expired_files / dt:,.0f} files/s",
                    f"{s.reclaimed_bytes / MB:,.2f} MB",
                )
            )
            engine.dispose()
            rows.append(_hot_clean(tmp, n_records, args.keys))
        finally:
            pg.stop()
    print(
        f"tierlog compaction benchmark: {args.files} files of {args.records:,} ~200-byte records "
        f"per topic, {args.keys:,} keys; moto S3 in memory; {os.cpu_count()} cores shared\n"
    )
    head = ("job", "work", "throughput", "bytes reclaimed / output")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    for r in [head, tuple("-" * w for w in widths), *rows]:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
