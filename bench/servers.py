"""The local servers a benchmark runs on, started side by side."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tierlog.devstack.local_s3 import LocalS3
from tierlog.devstack.localpg import LocalPostgres


def start_pg_and_s3(
    tmp: Path, *, fast: bool = True
) -> tuple[LocalPostgres, str, LocalS3, dict[str, str]]:
    """A private Postgres (tmp/pg) and SeaweedFS S3 endpoint (tmp/s3), started at once: each
    start mostly waits (initdb, the server's readiness), so together they take the longer of
    the two, not the sum. (server, its URL, endpoint, the endpoint's TIERLOG_S3_* settings);
    if either fails, the other is stopped before the error is raised."""
    pg, s3 = LocalPostgres(tmp / "pg", fast=fast), LocalS3(tmp / "s3")
    with ThreadPoolExecutor(2) as pool:
        url, env = pool.submit(pg.start), pool.submit(s3.start)
        try:
            return pg, url.result(), s3, env.result()
        except BaseException:
            for server, started in ((pg, url), (s3, env)):
                if started.exception() is None:
                    server.stop()
            raise
