"""A real `tierlog dev` process for tests: started on a data dir and a port from this
worker's block, waited for until its banner, stopped with Ctrl-C. Its log accumulates."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from tests.integration.ports import free_port
from tierlog.devstack.dev import KAFKA_PORT_SHIFT
from tierlog.devstack.dev_env import env_file, read_env_file
from tierlog.devstack.parent_watch import child_env

BANNER = "tierlog dev is up"
# The caller's external servers: dev is to start its own Postgres and S3.
_EXTERNAL = {
    "TIERLOG_DATABASE_URL",
    "TIERLOG_S3_ENDPOINT",
    "TIERLOG_S3_BUCKET",
    "TIERLOG_S3_PREFIX",
}


def dev_root() -> Path:
    """A directory for dev's data. Not pytest's tmp_path: as root, dev runs Postgres as the
    postgres user, which cannot traverse /tmp/pytest-of-root (mode 700)."""
    path = Path(tempfile.mkdtemp(prefix="tierlog-dev-test-"))
    path.chmod(0o755)
    return path


def dev_argv(data_dir: Path, port: int, *extra: str) -> list[str]:
    return [
        *(sys.executable, "-m", "tierlog", "dev"),
        *("--port", str(port), "--data-dir", str(data_dir), *extra),
    ]


def dev_env() -> dict[str, str]:
    return child_env({k: v for k, v in os.environ.items() if k not in _EXTERNAL})


class DevInstance:
    """`tierlog dev` on one data dir and port, for a module's tests."""

    def __init__(
        self,
        root: Path,
        *extra: str,
        data_dir: str = "dev-data",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root
        self.env = dict(env or {})  # on top of dev_env(): shorter timings for a test
        self.data_dir = root / data_dir
        self.log = root / "dev.log"
        self.extra = extra
        # dev: the console on port - 10, the broker on port, the fetch node on port + 10, Kafka
        # on port + 1012, all in this worker's block, so no other worker's server can take them.
        self.port = free_port(span=21, also=(10 + KAFKA_PORT_SHIFT,)) + 10
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def env_file(self) -> dict[str, str]:
        """The variables dev wrote to its env file."""
        return read_env_file(env_file(self.data_dir))

    def start(self) -> None:
        banners = self.log.read_text().count(BANNER) if self.log.exists() else 0
        with open(self.log, "ab") as f:
            self.proc = proc = subprocess.Popen(
                dev_argv(self.data_dir, self.port, *self.extra),
                env={**dev_env(), **self.env},
                stdout=f,
                stderr=subprocess.STDOUT,
            )
        # Generous: dev starts Postgres and S3, then the brokers, then the other roles, and on
        # the shared machine under load one broker's start-up alone has taken ~50 s.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert proc.poll() is None, self.log.read_text()
            # The banner comes once every part is up: brokers ready, S3, workers.
            if self.log.read_text().count(BANNER) > banners:
                r = httpx.get(f"{self.base}/readyz", timeout=5)
                assert r.status_code == 200
                return
            time.sleep(0.25)
        # As Ctrl-C: dev stops what it started (a SIGKILL would orphan its Postgres and S3).
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise AssertionError(f"tierlog dev did not come up:\n{self.log.read_text()}")

    def ctrl_c(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(60) == 0


def child_pid(parent: int, role: str) -> int:
    """The pid of `parent`'s child running `tierlog <role>` (from /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == parent and b"tierlog" in argv and role.encode() in argv:
            return int(entry.name)
    raise AssertionError(f"no `tierlog {role}` child of {parent}")
