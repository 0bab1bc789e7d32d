"""Every benchmark in bench/ runs (issue 16: nothing ran them, so they rotted): each one's
--smoke mode, as a user runs it (`python -m bench.X --smoke`), exits 0 after checking what it
measured, and prints its table. bench/long_polls.py and bench/client.py's cases run in their
own test files (test_long_polls.py, test_client_bulk.py, test_client_poll_arrow.py).

spark_scan's JVM spends most of its start waiting, so it runs beside replication, pipeline and
rolling_restart, which run one after the other in a lane of their own (a thread): they mostly
wait on leases, restarts, paced load and the Delta table catching up. Both start when the
first of their tests asks for them (the `background` fixture), so a worker that runs only the
other benchmarks starts neither: tests/conftest.py splits this file into three units of
xdist work (the lane's tests, and the others in two halves) that run on different workers."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.servers import SHARED_POSTGRES
from tests.conftest import _SPLIT_UNITS, split_units

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
        "broker lease 3 s (heartbeat 0.25 s;",
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
        "CPU s per GB read                      S3  server  reader  total  cores",
        "during a full-speed replay via broker (others niced)",
    ],
    "search": [
        "tierlog search benchmark: 20,000 records of ~100 B JSON values",
        "case                                         seconds    S3 MiB   table   hits vs base",
        "key search (cold caches)",
        "every answer checked against the records produced (20 per key)",
    ],
    "cost": [
        "tierlog cost benchmark: 1 broker, 1 fetch node, 1 partition",
        "$ per                       tierlog (S3 history)  3 broker disks   ratio",
        "GB-month of history",
        "replay checked: every offset from 0 once",
    ],
    "client_closed_loop": [
        "tierlog closed-loop benchmark: 2 processes x 0.5 s, rounds of 1000 records",
        "case                                          records/s  round p50 ms   p99 ms  vs Redis",
        "tierlog Producer.send() x1000, then wait",
        "checked: the broker's log (and the Redis stream) holds exactly the records acknowledged",
    ],
    "compaction": [
        "tierlog compaction benchmark: 8 files",
        "job               | work",
        "hot log cleaner",
    ],
    "erase": [
        "tierlog erase benchmark: 4 files of 500",
        "case                                seconds read rewritten MB rewritten of table",
        "baseline: rewrite the whole topic",
        "every other record kept at its offset",
    ],
    "schemas": [
        "tierlog schema registry benchmark: 1 broker (--insecure)",
        "case                                                 count  seconds      per s  vs base",
        "GET /schemas/ids/{id}, cached",
        "produce over Kafka, validation on",
        "every look-up answered its id's schema; each topic's log holds every record sent",
    ],
    "rolling_restart": [
        "tierlog rolling restart benchmark: 3 brokers RF=3, min.insync.replicas=2, acks=all",
        "phase                         seconds  produces   p50 ms   p99 ms",
        "p99 during / before:",
        "rolling restart: every guarantee held",
    ],
    "kafka_protocol": [
        "tierlog Kafka protocol benchmark: acks=all, 4 partitions",
        "  records/s    MB/s vs HTTP CPU us/rec: brokers clients",
        "1 broker        produce: Kafka, confluent, linger 50ms",
        "1 broker        consume: Kafka, confluent-kafka",
        "the Kafka consumer read the key and value bytes HTTP reads there",
        "transactions of 1,000 records vs idempotent (one producer)",
        "read_committed read every transactional record once",
        "the client's ceiling (the same cases against librdkafka's mock cluster",
    ],
    "typed_lake": [
        "tierlog typed lake benchmark: 5,000 Avro records",
        "case                       records/s   seconds     file MB  vs key_value",
        "table bytes typed / bytes-only:",
        "both files hold every record; typed values equal the encoded; sums agree",
    ],
}
# bench/servers.py's line: the run had a database on this worker's Postgres, not a server of
# its own (typed_lake uses no Postgres).
SHARED_LINE = "not a private one"
EXPECTED = {b: ls if b == "typed_lake" else [*ls, SHARED_LINE] for b, ls in EXPECTED.items()}
BACKGROUND = ("replication", "pipeline", "rolling_restart")  # run by the Lane, in this order
SPARK_EXPECTED = [
    "| query | rows | seconds | rows/s |",
    "| full scan (all columns), tierlog (S3) | 4,000 |",
    "| full scan (all columns), pass-through (local Arrow) | 4,000 |",
    "1% window bytes read:",
]


# Servers are started as a user starts them (`python -m tierlog`: a benchmark measures real
# processes, start-ups included), except in the smoke runs of the benchmarks that start many:
# there they fork from a pre-imported parent of the benchmark's own (tests/integration/
# zygote.py; the same main(), in processes of their own), which saves each start its imports.
# Smoke runs, each way (machine CPU-s): rolling_restart 20.1 -> 9.5, pipeline 32.6 -> 24.9,
# replication 10.5 -> 8.9; the others start one or two servers and gained nothing.
FORKED = ("rolling_restart", "pipeline", "replication")


def _start(bench: str, out: Path, postgres: str) -> subprocess.Popen[bytes]:
    with out.open("wb") as sink:  # a file, not a pipe: nobody reads while it runs
        return subprocess.Popen(
            [sys.executable, "-m", f"bench.{bench}", "--smoke"],
            cwd=ROOT,
            env={
                **os.environ,
                "TIERLOG_TEST_FORK": "1" if bench in FORKED else "0",
                # A database of its own on this worker's Postgres (bench/servers.py), not a
                # server of its own: initdb, start and stop cost ~0.8 CPU-s a benchmark.
                SHARED_POSTGRES: postgres,
            },
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


def _wait(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill_group(proc)


def _finished(proc: subprocess.Popen[bytes], out: Path, expected: list[str]) -> None:
    _wait(proc)
    text = out.read_text(errors="replace")
    assert proc.returncode == 0, text
    missing = [line for line in expected if line not in text]
    assert not missing, f"missing {missing} in:\n{text}"


class Lane:
    """Runs `benches` one after the other in a thread, beside the tests' own benchmarks."""

    def __init__(self, benches: tuple[str, ...], tmp: Path, postgres: str) -> None:
        self.postgres = postgres
        self.runs = {b: (tmp / f"{b}.txt", threading.Event()) for b in benches}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for bench, (out, done) in self.runs.items():
            try:
                if not self.stopping.is_set():
                    self.procs[bench] = _start(bench, out, self.postgres)
                    _wait(self.procs[bench])
            finally:
                done.set()  # its test fails on what is missing, never waits forever

    def result(self, bench: str) -> tuple[subprocess.Popen[bytes], Path]:
        out, done = self.runs[bench]
        assert done.wait(len(self.runs) * (TIMEOUT_S + 60)), f"{bench} never finished"
        assert bench in self.procs, f"{bench} did not start"
        return self.procs[bench], out

    def stop(self) -> None:
        """The tests that collect the lane did not all run (deselected): end what runs."""
        self.stopping.set()
        for proc in list(self.procs.values()):
            if proc.poll() is None:
                _kill_group(proc)
        self.thread.join(TIMEOUT_S + 60)


class Background:
    """The lane and spark_scan, started together by the first test that needs either."""

    def __init__(self, tmp: Path, postgres: str) -> None:
        self.lane = Lane(BACKGROUND, tmp / "lane", postgres)
        self.spark_scan: tuple[subprocess.Popen[bytes], Path] | None = None
        if shutil.which("java") is not None:
            out = tmp / "spark-smoke.txt"
            self.spark_scan = (_start("spark_scan", out, postgres), out)

    def stop(self) -> None:
        self.lane.stop()
        if self.spark_scan is not None and self.spark_scan[0].poll() is None:
            _kill_group(self.spark_scan[0])  # its test did not run (deselected)


@pytest.fixture(scope="module")
def background(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[Background]:
    tmp = tmp_path_factory.mktemp("background")
    (tmp / "lane").mkdir()
    started = Background(tmp, database_url)
    yield started
    started.stop()


@pytest.fixture(scope="module", autouse=True)
def _background_first(request: pytest.FixtureRequest) -> None:
    """Unless tests/conftest.py split this file over xdist workers (--dist loadfile), its tests
    run in this one process: the background then starts first, beside the other benchmarks."""
    if not split_units(request.config):
        request.getfixturevalue("background")


# The lane's benchmarks last: in one process, their tests wait for the lane while the others run.
@pytest.mark.parametrize("bench", sorted(EXPECTED, key=lambda b: b in BACKGROUND))
def test_bench_smoke(
    bench: str, tmp_path: Path, database_url: str, request: pytest.FixtureRequest
) -> None:
    if bench in BACKGROUND:
        lane: Lane = request.getfixturevalue("background").lane
        _finished(*lane.result(bench), EXPECTED[bench])
        return
    out = tmp_path / "out.txt"
    _finished(_start(bench, out, database_url), out, EXPECTED[bench])


def test_spark_scan_bench_smoke(background: Background) -> None:
    if background.spark_scan is None:
        pytest.skip("bench.spark_scan needs a JVM: no `java` on PATH")
    _finished(*background.spark_scan, SPARK_EXPECTED)


def test_the_xdist_split_names_every_foreground_benchmark() -> None:
    """tests/conftest.py splits this file's benchmarks over two workers by name: one missing
    from its table would still run, in the lane's unit, and unbalance the split."""
    assert set(_SPLIT_UNITS["test_bench_smoke.py"]) == set(EXPECTED) - set(BACKGROUND)
