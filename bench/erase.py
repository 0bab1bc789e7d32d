"""Erasing one key from a topic's cold tier (issue 31): time to erase and bytes rewritten,
against the baseline of rewriting the whole topic.

    .venv/bin/python -m bench.erase [--files 100] [--records 50000]   # ~400 MB in S3
    .venv/bin/python -m bench.erase --records 130000   # >= 1 GB in S3 (Parquet compresses)
    .venv/bin/python -m bench.erase --smoke   # 4 files of 500 records (the test suite)

Starts its own Postgres and moto's S3 server (in memory, loopback). Tiers the topic through
the tiering protocol (tests/integration/test_compaction_support.py: Parquet files with bloom
filters on key, as tiering writes them), with the erased key in 5% of the files (at least
one). Then, as the compaction worker does once every replica erased its hot log: the cold
erasure (manifest → footers and bloom filters → read candidates → rewrite the files holding
the key, one Delta commit). Baseline: the same rewrite of every file of the topic, which is
what a team without erasure does by hand. Each run is checked: no row of the key is left in
the table's files, and every other row is.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.databases import new_database
from bench.servers import bench_postgres
from coldstore.object_store import ObjectStore
from coldstore.parquet_writer import DEFAULT_ROW_GROUP_BYTES
from compaction.erasure_job import ColdErasure, Rewrite
from compaction.rewrite import read_data_file
from compaction.target import Target
from metadata.configs import topic_config
from metadata.db import make_engine, migrate
from metadata.erasures import COLD_SETTLE_MS, ErasureRepo
from metadata.types import TopicIdPartition
from tests.integration.s3 import MotoServer, config_for
from tests.integration.test_compaction_support import ColdEnv, now_ms

MB = 1e6
KEY = b"customer-000042"


def _tier(env: ColdEnv, topic: str, files: int, records: int, with_key: set[int]) -> None:
    """`files` files of `records` ~200-byte records over many keys; KEY in `with_key`."""
    now, offset = now_ms(), 0
    for f in range(files):
        recs = []
        for i in range(records):
            key = KEY if f in with_key and i % 1000 == 7 else b"user-%09d" % (offset * 7919 % 10**9)
            recs.append(
                {
                    "key": key,
                    "value": os.urandom(60) + b"event %d " % offset * 8,
                    "headers": None,
                    "ts": now - 3_600_000 + offset,
                }
            )
            offset += 1
        # row groups as tiering writes them (4 MiB), each with its bloom filter on key
        env.tier(topic, 0, recs, per_frame=1000, row_group_bytes=DEFAULT_ROW_GROUP_BYTES)


def _target(env: ColdEnv, topic: str) -> Target:
    return Target(env.ids[topic], topic, 0, topic_config({"file.delete.delay.ms": "60000"}))


def _left(env: ColdEnv, topic: str) -> tuple[int, int]:
    """(rows of KEY, rows in all) over the table's committed files, read from S3."""
    key_rows = rows = 0
    for f in env.manifest.files(TopicIdPartition(env.ids[topic], 0)):
        keys = read_data_file(env.store.get(f.object_key), ["key"]).column("key").to_pylist()
        key_rows, rows = key_rows + keys.count(KEY), rows + len(keys)
    return key_rows, rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--smoke", action="store_true", help="4 files of 500 records")
    args = parser.parse_args()
    if args.smoke:
        args.files, args.records = 4, 500
    with_key = set(range(0, args.files, 20)) or {0}  # 5% of the files (at least one)
    rows: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp, MotoServer() as moto:
        os.chmod(tmp, 0o755)
        pg = bench_postgres(Path(tmp) / "pg", fast=True)
        url = pg.start()
        try:
            engine = make_engine(new_database(url, "erase"))
            migrate(engine)
            config = config_for(moto.endpoint, "bench")
            ObjectStore(config).ensure_bucket()
            env = ColdEnv(engine, config)
            for topic in ("pii", "whole"):
                env.topic(topic, 1)
                _tier(env, topic, args.files, args.records, with_key)
            tp = TopicIdPartition(env.ids["pii"], 0)
            table = sum(f.size_bytes for f in env.manifest.files(tp))
            key_rows, total = _left(env, "pii")
            worker = env.worker()
            job = ColdErasure(worker.jobs, ErasureRepo(engine))
            for topic in ("pii", "whole"):  # both tables' Delta logs loaded before timing
                worker.jobs.table(_target(env, topic)).version()

            started = time.monotonic()
            r = job.erase(_target(env, "pii"), "bench", [KEY], 1 << 62)
            dt = time.monotonic() - started
            if _left(env, "pii") != (0, total - key_rows):
                raise SystemExit(f"the erasure left {_left(env, 'pii')} of {key_rows} rows")
            share = r["bytes_rewritten"] / table
            rows.append(
                (
                    "erase one key (bloom filters)",
                    f"{dt:8.2f}",
                    f"{r['files_read']:>4}",
                    f"{r['files_rewritten']:>4}",
                    f"{r['bytes_rewritten'] / MB:9.1f}",
                    f"{share:6.1%}",
                )
            )

            # Baseline: rewrite every file of an identical topic without the key's rows.
            t = _target(env, "whole")
            started = time.monotonic()
            files = env.manifest.files(t.tp)
            rewrites = []
            for f in files:
                data = read_data_file(env.store.get(f.object_key))
                keep = [k != KEY for k in data.column("key").to_pylist()]
                rewrites.append(Rewrite(f, data.filter(keep), keep.count(False)))
            job._commit(t, "baseline", rewrites)
            base = time.monotonic() - started
            whole = sum(f.size_bytes for f in files)
            rows.append(
                (
                    "baseline: rewrite the whole topic",
                    f"{base:8.2f}",
                    f"{len(files):>4}",
                    f"{len(files):>4}",
                    f"{whole / MB:9.1f}",
                    f"{1:6.1%}",
                )
            )
            worker.close()
            engine.dispose()
        finally:
            pg.stop()
    print(
        f"tierlog erase benchmark: {args.files} files of {args.records:,} ~200-byte records "
        f"({table / MB:,.1f} MB in S3), the key in {len(with_key)} file(s); moto S3 in memory; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}\n"
    )
    head = ("case", "seconds", "read", "rewritten", "MB rewritten", "of table")
    print(f"{head[0]:<34} {head[1]:>8} {head[2]:>4} {head[3]:>9} {head[4]:>12} {head[5]:>8}")
    for c, s, rd, rw, mb, pct in rows:
        print(f"{c:<34} {s:>8} {rd:>4} {rw:>9} {mb:>12} {pct:>8}")
    print(f"\nerased {key_rows} record(s) of the key; every other record kept at its offset")
    print(
        f"time to done: the erase above + {COLD_SETTLE_MS / 1000:.0f} s after the cold commit "
        "(metadata/erasures.py COLD_SETTLE_MS: readers that missed the NOTIFY stop trusting "
        "their file lists) + the brokers' duty interval"
    )


if __name__ == "__main__":
    main()
