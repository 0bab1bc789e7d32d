"""`tierlog dev` end to end: its own Postgres and S3, a broker, Ctrl-C, data across restarts."""

from __future__ import annotations

import os
import shlex
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

from tests.integration.ports import free_port
from tiering.object_store import ObjectStore, ObjectStoreConfig
from tierlog.parent_watch import child_env

_EXTERNAL = {
    "TIERLOG_DATABASE_URL",
    "TIERLOG_S3_ENDPOINT",
    "TIERLOG_S3_BUCKET",
    "TIERLOG_S3_PREFIX",
}
_BANNER = "tierlog dev is up"


def _s3_env(data_dir: Path) -> dict[str, str]:
    """data_dir/s3.env, the S3 variables `tierlog dev` gives its children (KEY=shell-quoted)."""
    env = {}
    for line in (data_dir / "s3.env").read_text().splitlines():
        key, _, value = line.partition("=")
        env[key] = shlex.split(value)[0] if value else ""
    return env


def _start(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    # dev's own Postgres and S3, not the caller's
    env = child_env({k: v for k, v in os.environ.items() if k not in _EXTERNAL})
    banners = log.read_text().count(_BANNER) if log.exists() else 0
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
        # The banner comes once every part is up: brokers ready, S3, workers.
        if log.read_text().count(_BANNER) > banners:
            assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
            return proc
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
    port = free_port(span=11)  # dev: the broker on port, the fetch node on port + 10
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
        # The S3 endpoint dev started (SeaweedFS): named in the banner and in data_dir/s3.env,
        # on loopback, with the bucket created and the credentials working.
        s3_env = _s3_env(data_dir)
        endpoint = s3_env["TIERLOG_S3_ENDPOINT"]
        assert endpoint.startswith("http://127.0.0.1:")
        assert f"S3 at {endpoint} bucket tierlog" in log.read_text()
        assert "workers: tiering" in log.read_text()  # the tiering worker runs beside
        store = ObjectStore(ObjectStoreConfig.from_env(s3_env))
        store.put("dev-test/marker", b"kept")
    finally:
        _ctrl_c(proc)
    assert (data_dir / "postgres").is_dir()
    with pytest.raises(httpx.TransportError):  # Ctrl-C stopped S3 too
        httpx.get(f"{endpoint}/healthz", timeout=2)
    proc = _start(data_dir, port, log)
    try:
        assert _s3_env(data_dir) == s3_env
        assert store.get("dev-test/marker") == b"kept"
        for o, value in zip(placed, [{"hello": "world"}, "hi"], strict=True):
            doc = httpx.get(
                f"{base}/topics/greetings/partitions/{o['partition']}/records",
                params={"offset": o["offset"]},
            ).json()
            assert doc["records"][0]["value"] == value
    finally:
        _ctrl_c(proc)
