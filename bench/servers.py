"""The local servers a benchmark runs on, started side by side.

Postgres is a private server in the run's temp dir (initdb, start, stop: ~0.8 CPU-s and a
few seconds), unless $TIERLOG_BENCH_POSTGRES names a server to use instead: then the run
gets a database of its own there, dropped at its end, and says so in its output. The test
suite's smoke runs pass their worker's server (tests/integration/test_bench_smoke.py); its
settings are the suite's (fsync off), which only a smoke run may measure on.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from sqlalchemy.engine import make_url

from bench.databases import drop_database, new_database
from tierlog.devstack.local_s3 import LocalS3
from tierlog.devstack.localpg import LocalPostgres

SHARED_POSTGRES = "TIERLOG_BENCH_POSTGRES"  # a server URL whose user may CREATE DATABASE


class BenchPostgres(Protocol):
    def start(self) -> str: ...

    def stop(self) -> None: ...


class SharedDatabase:
    """A database of the run's own on a server it did not start (LocalPostgres's interface)."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.url = ""

    def start(self) -> str:
        self.url = new_database(self.server_url, "bench")
        where = make_url(self.url)
        print(
            f"Postgres: database {where.database} on the server ${SHARED_POSTGRES} names "
            f"({where.host}:{where.port}), not a private one",
            flush=True,
        )
        return self.url

    def stop(self) -> None:
        if self.url:
            drop_database(self.url)
            self.url = ""


def bench_postgres(data_dir: Path, *, fast: bool) -> BenchPostgres:
    """The run's Postgres: a database on $TIERLOG_BENCH_POSTGRES's server if set, else a
    private server in `data_dir` (`fast`: fsync off, for smoke runs only)."""
    shared = os.environ.get(SHARED_POSTGRES)
    return SharedDatabase(shared) if shared else LocalPostgres(data_dir, fast=fast)


def start_pg_and_s3(
    tmp: Path, *, fast: bool = True
) -> tuple[BenchPostgres, str, LocalS3, dict[str, str]]:
    """The run's Postgres (bench_postgres) and a private SeaweedFS S3 endpoint (tmp/s3),
    started at once: each start mostly waits (initdb, the server's readiness), so together
    they take the longer of the two, not the sum. (server, its URL, endpoint, the endpoint's
    TIERLOG_S3_* settings); if either fails, the other is stopped before the error is raised."""
    pg, s3 = bench_postgres(tmp / "pg", fast=fast), LocalS3(tmp / "s3")
    with ThreadPoolExecutor(2) as pool:
        url, env = pool.submit(pg.start), pool.submit(s3.start)
        try:
            return pg, url.result(), s3, env.result()
        except BaseException:
            for server, started in ((pg, url), (s3, env)):
                if started.exception() is None:
                    server.stop()
            raise
