"""A tierlog process started by `tierlog dev` (or this harness) stops, cleanly, when its
parent is killed: no orphaned brokers holding ports after a `kill -9` of dev or of pytest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from http_transport.trust import default_trust
from tests.integration.cluster import wait_for
from tests.integration.ports import free_port

PARENT = """
import os, subprocess, sys, time
from tierlog.devstack.parent_watch import child_env
log = open(sys.argv[2], "ab")
argv = [sys.executable, "-m", "tierlog", "broker", "--insecure", "--listen", sys.argv[1],
        "--data-dir", sys.argv[3]]
child = subprocess.Popen(argv, env=child_env(dict(os.environ)), stdout=log, stderr=log)
print(child.pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie nobody has reaped yet (PID 1 in a container)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in ("Z", "X")


def test_a_broker_stops_when_its_parent_is_killed(fresh_db: str, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "broker.log"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, f"127.0.0.1:{port}", str(log), str(tmp_path / "data")],
        env={**os.environ, "TIERLOG_DATABASE_URL": fresh_db},
        stdout=subprocess.PIPE,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        wait_for(
            "the broker ready",
            lambda: (
                httpx.get(
                    f"http://127.0.0.1:{port}/readyz", timeout=1, verify=default_trust()
                ).status_code
                == 200
            ),
            timeout=60,
        )
        parent.kill()  # SIGKILL: the parent gets no chance to stop its child
        parent.wait()
        wait_for("the orphan to stop", lambda: _gone(child), timeout=30)
        assert "broker stopped" in log.read_text()  # SIGTERM: a clean shutdown
    finally:
        if not _gone(child):
            os.kill(child, signal.SIGKILL)
