"""A worker that starts while Postgres is away waits for it rather than dying on its first
connection (the chaos run caught a tiering worker whose start-up migration met a frozen
Postgres: it exited, and nothing was tiered for the rest of the run)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from coldstore.object_store import ObjectStoreConfig
from tests.integration.cluster import wait_for
from tests.integration.fetch_nodes import s3_env
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.tcp_proxy import TcpProxy
from tierlog.devstack.parent_watch import child_env


@pytest.fixture
def pg_proxy(fresh_db: str) -> Iterator[tuple[TcpProxy, str]]:
    """A cuttable relay to the test's database, and the URL through it."""
    url = make_url(fresh_db)
    proxy = TcpProxy(url.port or 5432, url.host or "127.0.0.1")
    try:
        yield proxy, url.set(host="127.0.0.1", port=proxy.port).render_as_string(False)
    finally:
        proxy.close()


def _start_worker(
    url: str, s3: ObjectStoreConfig, log: Path, wait_s: str
) -> subprocess.Popen[bytes]:
    env = child_env(
        {**os.environ, **s3_env(s3), "TIERLOG_DATABASE_URL": url, "TIERLOG_STARTUP_WAIT_S": wait_s}
    )
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tierlog", "tiering", "--poll-ms", "200"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_worker_waits_for_postgres_then_runs(
    pg_proxy: tuple[TcpProxy, str], s3_bucket: ObjectStoreConfig, tmp_path: Path
) -> None:
    proxy, url = pg_proxy
    proxy.cut()
    log = tmp_path / "tiering.log"
    proc = _start_worker(url, s3_bucket, log, "60")
    try:
        wait_for("a retry", lambda: "Postgres unreachable, retrying" in log.read_text() or None, 60)
        assert proc.poll() is None, log.read_text()
        proxy.restore()
        wait_for("the worker", lambda: "tiering worker started" in log.read_text() or None, 60)
        assert "Postgres reachable" in log.read_text()
        assert proc.poll() is None, log.read_text()
    finally:
        proc.terminate()
        proc.wait(30)


def test_worker_gives_up_with_a_clear_message(
    pg_proxy: tuple[TcpProxy, str], s3_bucket: ObjectStoreConfig, tmp_path: Path
) -> None:
    proxy, url = pg_proxy
    proxy.cut()
    log = tmp_path / "tiering.log"
    proc = _start_worker(url, s3_bucket, log, "1")
    started = time.monotonic()
    assert proc.wait(60) == 1, log.read_text()
    text = log.read_text()
    assert "tierlog tiering: Postgres still unreachable after 1s" in text, text
    assert "Traceback" not in text, text
    assert time.monotonic() - started < 60


def test_worker_refuses_a_batch_setting_below_one() -> None:
    env = child_env({**os.environ, "TIERLOG_DATABASE_URL": "postgresql://nowhere/x"})
    done = subprocess.run(
        [sys.executable, "-m", "tierlog", "tiering", "--batch-segments", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "--batch-segments must be 1 or more" in done.stderr
