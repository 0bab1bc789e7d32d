"""Spark over an archived topic: the tierlog source against Spark's native Parquet reader.

    .venv/bin/python -m bench.spark_scan [--records 3000000] [--partitions 2] [--files 6]
    .venv/bin/python -m bench.spark_scan --smoke   # 4,000 records, 2 files (the test suite)

Builds an archived topic the way tiering does (frames → coldstore.parquet_writer → S3 →
Delta commit) on a private SeaweedFS (`weed mini`, as `tierlog dev` runs), copies the same
data files to local disk, then in one run, with one local[2] SparkSession:

- full scan through `format("tierlog")` (S3, the Python data source) and through
  `spark.read.parquet` over the local copies (the JVM's vectorized reader): every column
  materialized (a `noop` write), and an aggregate over key, value, offset and timestamp;
- a projection of two columns (key, timestamp) materialized: the tierlog source with its
  `columns` option (Spark 4.2 prunes no columns of a Python data source itself), the native
  reader with a select (it prunes);
- a 1% time window through each, and the bytes the tierlog source fetched for it (its plan's
  footers plus its tasks' reads, from `reportDir`) against the table's total bytes.

Prints rows/s for each, the tierlog/native ratio, and the window's bytes fraction; first checks
that both readers count every record, and the same records in the window. Goals:
full scan >= 50% of native rows/s; two-column projection >= 70%; the 1% window reads <= 5% of
the bytes. Spark 4.2's Python data sources get no column pruning: without the `columns`
option every column crosses from the Python worker to the JVM (Arrow), so a query that needs
few columns says so with the option.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import data_file_key, table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from coldstore.parquet_writer import write_parquet
from logformat.frame import encode_frame
from logformat.records import build_batch
from spark_tables import report, store_options, tierlog_session
from tierlog.devstack.local_s3 import LocalS3

T0 = 1_700_000_000_000
TOPIC = "bench"
FRAME = 2000  # records per frame, as a batching producer sends them


def segment(partition: int, base: int, n: int, step_ms: int, stride: int) -> bytes:
    """A sealed segment of `n` records; record i of the topic is at T0 + i * step_ms."""
    frames = []
    for start in range(base, base + n, FRAME):
        offs = range(start, min(base + n, start + FRAME))
        seq = [o * stride + partition for o in offs]  # global order across partitions
        values: list[bytes | None] = [
            b'{"user":"u%04d","event":"page_view","ok":true,"seq":%d,"path":"/products/%05d"}'
            % (i % 997, i, i % 5000)
            for i in seq
        ]
        batch = build_batch(
            [b"u%04d" % (i % 997) for i in seq],
            values,
            [None] * len(seq),
            [T0 + i * step_ms for i in seq],
            T0,
        )
        frames.append(bytes(encode_frame(batch, base_offset=start, compression="zstd")))
    return b"".join(frames)


def build_archive(
    store: ObjectStoreConfig, local: Path, records: int, parts: int, files: int
) -> int:
    """Tier `records` records into `parts` partitions of `files` files each; returns bytes."""
    ObjectStore(store).ensure_bucket()
    table = DeltaTopicTable(table_uri(store, TOPIC), store.storage_options(), topic=TOPIC)
    table.ensure_created()
    obj = ObjectStore(store)
    per_file = records // (parts * files)
    total = 0
    for p in range(parts):
        for f in range(files):
            pq_file = write_parquet(segment(p, f * per_file, per_file, 10, parts))
            assert isinstance(pq_file.output, bytes)
            key = data_file_key(store, TOPIC, p, f * per_file)
            obj.put(key, pq_file.output)
            table.commit_file(p, pq_file, key)
            dest = local / f"partition={p}" / key.rsplit("/", 1)[1]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(pq_file.output)
            total += pq_file.size_bytes
    return total


def timed(action: Callable[[], Any], repeat: int) -> float:
    """Best wall time of `repeat` runs (after one warm-up run: Python workers, JIT, caches)."""
    action()
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


PROJECTION = ("key", "timestamp")


def check_projection(tierlog: DataFrame, native: DataFrame) -> None:
    """The projected source returns the native reader's rows of those columns (a digest of
    each column, computed by Spark on both sides)."""
    digest = ("count(*)", "sum(crc32(key))", "sum(unix_millis(timestamp))", "max(timestamp)")
    got = tierlog.selectExpr(*digest).collect()[0]
    want = native.selectExpr(*digest).collect()[0]
    if sorted(tierlog.columns) != sorted(PROJECTION) or got != want:
        raise SystemExit(
            f"projection differs: {tierlog.columns} {tuple(got)} against native {tuple(want)}"
        )


def materialize(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--files", type=int, default=6, help="data files per partition")
    ap.add_argument("--repeat", type=int, default=3, help="runs per query (best is kept)")
    ap.add_argument("--smoke", action="store_true", help="4,000 records in 2 files, 1 run")
    args = ap.parse_args()
    if args.smoke:
        args.records, args.partitions, args.files, args.repeat = 4000, 1, 2, 1
    work = Path(tempfile.mkdtemp(prefix="tierlog-spark-bench-"))
    s3 = LocalS3(work / "s3")
    spark: SparkSession | None = None
    try:
        env = s3.start()
        store = ObjectStoreConfig.from_env({**env, "TIERLOG_S3_BUCKET": "bench"})
        local = work / "local"
        print(f"building {args.records:,} records in {args.partitions}x{args.files} files ...")
        total_bytes = build_archive(store, local, args.records, args.partitions, args.files)
        n = args.records // (args.partitions * args.files) * args.partitions * args.files
        quiet = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
        spark = tierlog_session("spark-scan-bench", "local[2]", quiet)
        spark.sparkContext.setLogLevel("ERROR")
        report_dir = work / "report"
        opts = {**store_options(store), "reportDir": str(report_dir)}

        def tierlog() -> DataFrame:
            assert spark is not None
            return spark.read.format("tierlog").options(**opts).load(TOPIC)

        def projected() -> DataFrame:
            assert spark is not None
            reader = spark.read.format("tierlog").options(**opts)
            return reader.option("columns", ",".join(PROJECTION)).load(TOPIC)

        native = spark.read.parquet(str(local))

        def spark_sql(query: str) -> None:
            assert spark is not None
            spark.sql(query).collect()

        # a 1% window of the topic's time range (records are 10 ms apart, spread evenly)
        span = n * 10
        lo, hi = T0 + span * 50 // 100, T0 + span * 51 // 100
        window = f"unix_millis(timestamp) >= {lo} AND unix_millis(timestamp) < {hi}"
        ts_window = f"timestamp >= timestamp_millis({lo}) AND timestamp < timestamp_millis({hi})"
        counts = (tierlog().count(), native.count(), n)
        check_projection(projected(), native)
        want = native.where(window).count()
        got = tierlog().where(ts_window).count()
        if len(set(counts)) != 1 or got != want or not want:
            raise SystemExit(f"counts differ: tierlog, native, built {counts}; window {got} {want}")

        # Full scan, two ways: every column materialized (a noop write), and an aggregate
        # that reads key, value, offset and timestamp of every record.
        agg = (
            "SELECT count(*), sum(length(key)), sum(length(value)), max(offset), "
            "max(timestamp) FROM {}"
        )
        tierlog().createOrReplaceTempView("t_tierlog")
        native.createOrReplaceTempView("t_native")
        results = [
            ("full scan (all columns), tierlog (S3)", n, lambda: materialize(tierlog())),
            ("full scan (all columns), native Parquet (local)", n, lambda: materialize(native)),
            ("full scan (aggregate), tierlog (S3)", n, lambda: spark_sql(agg.format("t_tierlog"))),
            (
                "full scan (aggregate), native Parquet (local)",
                n,
                lambda: spark_sql(agg.format("t_native")),
            ),
            (
                "projection (key, timestamp), tierlog (S3)",
                n,
                lambda: materialize(projected().select(*PROJECTION)),
            ),
            (
                "projection (key, timestamp), native Parquet (local)",
                n,
                lambda: materialize(native.select(*PROJECTION)),
            ),
            ("1% window, tierlog (S3)", want, lambda: materialize(tierlog().where(ts_window))),
            (
                "1% window, native Parquet (local)",
                want,
                lambda: materialize(native.where(ts_window)),
            ),
        ]
        timings = [(name, count, timed(action, args.repeat)) for name, count, action in results]
        report.clear(report_dir)
        materialize(tierlog().where(ts_window))
        entries = report.read(report_dir)
        plan = [e for e in entries if e["kind"] == "plan"][-1]
        read = plan["footer_bytes"] + sum(e["bytes_read"] for e in entries if e["kind"] == "read")

        print(
            f"\n{n:,} records, {total_bytes:,} bytes in {plan['files_listed']} files; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
            f"best of {args.repeat} runs after a warm-up\n"
        )
        print("| query | rows | seconds | rows/s |")
        print("| --- | ---: | ---: | ---: |")
        for name, count, secs in timings:
            print(f"| {name} | {count:,} | {secs:.2f} | {count / secs:,.0f} |")
        rate = {name: count / secs for name, count, secs in timings}
        print()
        for case, goal in (
            ("full scan (all columns)", 50),
            ("full scan (aggregate)", 50),
            ("projection (key, timestamp)", 70),
        ):
            ratio = rate[f"{case}, tierlog (S3)"] / rate[f"{case}, native Parquet (local)"]
            print(f"{case} rows/s, tierlog / native: {ratio:.0%} (goal >= {goal}%)")
        print(
            f"1% window bytes read: {read:,} of {total_bytes:,} = {read / total_bytes:.2%} "
            f"(goal <= 5%; {len(plan['files_planned'])} of {plan['files_listed']} files, "
            f"{sum(len(v) for v in plan['row_groups'].values())} row groups)"
        )
    finally:
        if spark is not None:
            spark.stop()
        s3.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
