"""Compaction throughput: small-file merge, key compaction, retention + sweep.

    .venv/bin/python -m bench.compaction [--files 64] [--records 2000] [--keys 1000]

Starts its own Postgres and moto's S3 server (in memory, loopback: the figures are the
worker's CPU and protocol cost, not a network's). Tiers the data through the tiering
protocol (tests/integration/test_compaction_support.py), then times one compaction pass per
job. Prints a table: files/s and MB/s of input for the merge, records/s for key compaction,
bytes reclaimed for each.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.replication import _new_database
from metadata.db import make_engine, migrate
from tests.integration.s3 import MotoServer, config_for
from tests.integration.test_compaction_support import ColdEnv, now_ms
from tiering.object_store import ObjectStore
from tierlog.localpg import LocalPostgres

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
    return sum(f.size_bytes for f in env.manifest.files(env.ids[topic], 0))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--keys", type=int, default=1000)
    args = parser.parse_args()
    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp, MotoServer() as moto:
        os.chmod(tmp, 0o755)
        pg = LocalPostgres(Path(tmp) / "pg", fast=True)
        url = pg.start()
        try:
            engine = make_engine(_new_database(url, "compaction"))
            migrate(engine)
            config = config_for(moto.endpoint, "bench")
            ObjectStore(config).ensure_bucket()
            env = ColdEnv(engine, config)
            n_records = args.files * args.records

            # 1. small-file merge: every file is far below the target
            env.topic("merge", **{"retention.ms": "-1", "file.delete.delay.ms": "0"})
            size = _tier(env, "merge", args.files, args.records, args.records * args.files)
            target = size // 4 + 1
            w = env.worker(target_file_bytes=target, merge_min_files=2)
            started = time.monotonic()
            s = w.run_once()
            dt = time.monotonic() - started
            after = env.manifest.files(env.ids["merge"], 0)
            rows.append(
                (
                    "merge",
                    f"{s.merged_files} files → {len(after)} in {dt:.2f}s",
                    f"{s.merged_files / dt:,.0f} files/s, {size / MB / dt:,.1f} MB/s",
                    f"{len(after)} files of ~{target / MB:.1f} MB (dataChange=false)",
                )
            )

            # 2. key compaction: `keys` keys updated over and over
            env.topic("table", **{"cleanup.policy": "compact", "min.compaction.lag.ms": "0"})
            size = _tier(env, "table", args.files, args.records, args.keys)
            w = env.worker(target_file_bytes=64 << 20)
            started = time.monotonic()
            s = w.run_once()
            dt = time.monotonic() - started
            kept = env.manifest.files(env.ids["table"], 0)
            left = sum(f.size_bytes for f in kept)
            rows.append(
                (
                    "key compaction",
                    f"{n_records:,} → {sum(f.records for f in kept):,} records in {dt:.2f}s",
                    f"{n_records / dt:,.0f} records/s, {size / MB / dt:,.1f} MB/s",
                    f"{(size - left) / MB:,.2f} MB of {size / MB:,.2f} MB",
                )
            )

            # 3. retention by time + the sweep after the grace period
            env.topic("old", **{"retention.ms": "1000", "file.delete.delay.ms": "0"})
            size = _tier(env, "old", args.files, args.records, args.keys)
            w = env.worker()
            started = time.monotonic()
            s = w.run_once()
            dt = time.monotonic() - started
            rows.append(
                (
                    "retention + sweep",
                    f"{s.expired_files} files expired, {s.deleted_objects} objects deleted "
                    f"in {dt:.2f}s",
                    f"{s.expired_files / dt:,.0f} files/s",
                    f"{s.reclaimed_bytes / MB:,.2f} MB",
                )
            )
            w.close()
            engine.dispose()
        finally:
            pg.stop()
    head = ("job", "work", "throughput", "bytes reclaimed / output")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    for r in [head, tuple("-" * w for w in widths), *rows]:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
