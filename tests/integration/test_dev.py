"""`tierlog dev` end to end: its own Postgres, a broker, Ctrl-C, and data across restarts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.brokers import free_port


def _start(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "TIERLOG_DATABASE_URL"}
    with open(log, "ab") as f:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tierlog",
                "dev",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
            ],
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    proc.kill()
    raise AssertionError(f"tierlog dev did not come up:\n{log.read_text()}")


def _ctrl_c(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0


@pytest.fixture
def dev_dir() -> Iterator[Path]:
    # Not pytest's tmp_path: as root, dev runs Postgres as the postgres user, which cannot
    # traverse /tmp/pytest-of-root (mode 700).
    path = Path(tempfile.mkdtemp(prefix="tierlog-dev-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_dev_runs_the_quickstart_and_keeps_data(dev_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    data_dir = dev_dir / "dev-data"
    log = tmp_path / "dev.log"
    base = f"http://127.0.0.1:{port}"
    proc = _start(data_dir, port, log)
    try:
        # The README's curl quickstart, as HTTP calls.
        r = httpx.post(f"{base}/topics", json={"name": "greetings", "partitions": 3})
        assert r.status_code == 201, r.text
        r = httpx.post(
            f"{base}/topics/greetings/records",
            json={
                "records": [
                    {"key": "alice", "value": {"hello": "world"}},
                    {"key": "bob", "value": "hi"},
                ]
            },
        )
        assert r.status_code == 200, r.text
        placed = r.json()["offsets"]
    finally:
        _ctrl_c(proc)
    assert (data_dir / "postgres").is_dir()
    proc = _start(data_dir, port, log)
    try:
        for o, value in zip(placed, [{"hello": "world"}, "hi"], strict=True):
            doc = httpx.get(
                f"{base}/topics/greetings/partitions/{o['partition']}/records",
                params={"offset": o["offset"]},
            ).json()
            assert doc["records"][0]["value"] == value
    finally:
        _ctrl_c(proc)
