"""A class-data sharing archive for the JVMs the tests start (Spark's driver: the suite's
SparkSession, examples/spark_query.py, the Spark benchmarks' smoke runs).

A Spark driver loads ~14,000 classes from Spark's jars before its first query answers, and
each of the suite's four JVMs loaded and parsed them again. JDK 17 can map them from an
archive written by an earlier JVM (`-XX:ArchiveClassesAtExit`, a dynamic CDS archive): a local
session's start and a small query took 9.7 -> 6.7 CPU-s and 8.5 -> 5.5 s (this machine,
2026-12-02, three runs each way).

`python -m tests.jvm_archive` writes it (scripts/test, in the background while mypy runs) by
running the kinds of work the tests do: Parquet, a shuffle, a Python UDF and a Python data
source. tests/conftest.py points every test JVM at it when it exists. A JVM whose class path
or jars differ from the archive's (spark-submit's launcher JVM; a changed pyspark) checks
that and runs without it, silently (`-Xlog:cds=off`)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# In the venv: the archive belongs to its pyspark's jars, and goes with it.
ARCHIVE = ROOT / ".venv" / "spark-classes.jsa"
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def jvm_options() -> str:
    """What a test JVM adds to its options to map the archive: nothing when there is none."""
    return f" -XX:SharedArchiveFile={ARCHIVE} {QUIET}" if ARCHIVE.is_file() else ""


def _workload() -> None:
    """The kinds of work the tests' JVMs do, so their classes are in the archive."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from spark_tables import tierlog_session

    class Rows(DataSource):
        @classmethod
        def name(cls) -> str:
            return "archive_rows"

        def schema(self) -> str:
            return "id long, name string"

        def reader(self, schema: object) -> DataSourceReader:
            return RowsReader()

    class RowsReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(0), InputPartition(1)]

        def read(self, partition: InputPartition) -> Iterator[tuple[int, str]]:
            yield from ((i, f"r{i}") for i in range(10))

    spark = tierlog_session(
        "jvm-archive",
        "local[2]",
        {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = f"{tmp}/t.parquet"
            pq.write_table(
                pa.table({"a": list(range(1000)), "b": [str(i) for i in range(1000)]}), path
            )
            df = spark.read.parquet(path)
            df.groupBy((df.a % 7).alias("k")).count().collect()
            df.mapInArrow(lambda batches: batches, df.schema).count()
            spark.dataSource.register(Rows)
            spark.read.format("archive_rows").load().groupBy("name").count().collect()
    finally:
        spark.stop()


def main() -> int:
    """Write the archive (unless there is one): a JVM runs the work and dumps its classes at
    exit into a temporary file, renamed into place only when that run succeeded."""
    if ARCHIVE.is_file():
        return 0
    from tests.conftest import JVM_TEST_OPTIONS

    partial = ARCHIVE.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    env = {
        **os.environ,
        "JDK_JAVA_OPTIONS": f"{JVM_TEST_OPTIONS} -XX:ArchiveClassesAtExit={partial} {QUIET}",
        "OPENBLAS_NUM_THREADS": "1",
    }
    run = subprocess.run(
        [sys.executable, "-c", "from tests.jvm_archive import _workload; _workload()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=600,
    )
    if run.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        sys.stderr.write(run.stderr.decode(errors="replace")[-2000:])
        return 1
    partial.rename(ARCHIVE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
