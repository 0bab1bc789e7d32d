"""Every benchmark in bench/ runs (issue 16: nothing ran them, so they rotted): each one's
--smoke mode, as a user runs it (`python -m bench.X --smoke`), exits 0 after checking what it
measured, and prints its table. bench/long_polls.py and the bench/client*.py ones run in their
own test files (test_long_polls.py, test_client_bulk.py, test_client_poll_arrow.py).

spark_scan's JVM spends most of its start waiting, so it runs beside the others (started by a
module fixture, collected by the last test): the module takes ~60 s instead of ~90 s."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 240  # far above a smoke run's seconds: a hang fails instead of stalling the suite

# bench module → lines its output must hold: the header that states the settings, the table's
# header, and a line that only a finished run prints.
EXPECTED = {
    "produce": [
        "tierlog produce benchmark: 1 broker, acks=1",
        "case                      records/s     MB/s   p50 ms   p99 ms requests errors vs base",
        "tierlog arrow ",
        "broker log end offset after the run:",
    ],
    "replication": [
        "tierlog replication benchmark:",
        "3 brokers RF=3, acks=all",
        "controller lease 3 s (heartbeat 0.25 s,",
        "of which detection + election (a new leader described) p50",
    ],
    "tiering": [
        "tierlog tiering benchmark: 1 broker",
        "   records  seconds   records/s  raw MB/s  Parquet MB/s  s/segment",
        "drained ",
        "3. cold size",
    ],
    "pipeline": [
        "tierlog pipeline benchmark: Producer (acks=all, send_batch of 500) → 3 brokers",
        "offered rec/s  got rec/s   MB/s  p50 ms  p99 ms errors lag MB max",
        "produce→Delta freshness p50",
        "records in the Delta table, each acknowledged offset exactly once",
    ],
    "replay": [
        "tierlog replay benchmark: 20,000 records",
        "case                                 records/s     MB/s  GETs/GB  vs raw",
        "replay via fetch node",
        "during a full-speed replay via broker (others niced)",
    ],
    "search": [
        "tierlog search benchmark: 20,000 records of ~100 B JSON values",
        "case                                         seconds    S3 MiB   table   hits vs base",
        "key search (cold caches)",
        "every answer checked against the records produced (20 per key)",
    ],
    "compaction": [
        "tierlog compaction benchmark: 8 files",
        "job               | work",
        "hot log cleaner",
    ],
    "kafka_protocol": [
        "tierlog Kafka protocol benchmark: acks=all, 4 partitions",
        "  records/s    MB/s vs HTTP CPU us/rec: brokers clients",
        "1 broker        produce: Kafka, confluent, linger 50ms",
        "1 broker        consume: Kafka, confluent-kafka",
        "the Kafka consumer read the key and value bytes HTTP reads there",
    ],
}
SPARK_EXPECTED = [
    "| query | rows | seconds | rows/s |",
    "| full scan (all columns), tierlog (S3) | 4,000 |",
    "1% window bytes read:",
]


def _start(bench: str, out: Path) -> subprocess.Popen[bytes]:
    with out.open("wb") as sink:  # a file, not a pipe: nobody reads while it runs
        return subprocess.Popen(
            [sys.executable, "-m", f"bench.{bench}", "--smoke"],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group, for the last resort below
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop a benchmark that is still running: Ctrl-C first, so its clean-up stops the servers
    it started in sessions of their own (Postgres, weed), then SIGKILL for its whole group."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _finished(proc: subprocess.Popen[bytes], out: Path, expected: list[str]) -> None:
    try:
        proc.wait(TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
    text = out.read_text(errors="replace")
    assert proc.returncode == 0, text
    missing = [line for line in expected if line not in text]
    assert not missing, f"missing {missing} in:\n{text}"


@pytest.fixture(scope="module", autouse=True)
def spark_scan(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.Popen[bytes], Path] | None]:
    if shutil.which("java") is None:
        yield None
        return
    out = tmp_path_factory.mktemp("spark-smoke") / "out.txt"
    proc = _start("spark_scan", out)
    yield proc, out
    if proc.poll() is None:  # its test did not run (deselected)
        _kill_group(proc)


@pytest.mark.parametrize("bench", EXPECTED)
def test_bench_smoke(bench: str, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    _finished(_start(bench, out), out, EXPECTED[bench])


def test_spark_scan_bench_smoke(spark_scan: tuple[subprocess.Popen[bytes], Path] | None) -> None:
    if spark_scan is None:
        pytest.skip("bench.spark_scan needs a JVM: no `java` on PATH")
    _finished(*spark_scan, SPARK_EXPECTED)
