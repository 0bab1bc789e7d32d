"""`tierlog dev`: Postgres, N brokers (and later tiering/compaction) on one machine.

Each broker runs as its own process, as in production; this supervisor starts them, restarts
one that dies, and stops everything on Ctrl-C. All state lives under --data-dir, so a second
`tierlog dev` finds its topics and records again.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tierlog import logs

log = logging.getLogger("tierlog.dev")


class Child:
    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name, self.argv, self.env = name, argv, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, env=self.env)

    def stop(self, timeout: float = 10) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _wait_ready(url: str, child: Child, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.proc is not None and child.proc.poll() is not None:
            raise RuntimeError(
                f"{child.name} exited with code {child.proc.returncode} while starting"
            )
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{child.name} was not ready at {url} within {timeout:.0f}s")


def run_dev(data_dir: Path, brokers: int, port: int, log_level: str = "INFO") -> int:
    logs.setup("dev", log_level)
    data_dir.mkdir(parents=True, exist_ok=True)
    pg = None
    database_url = os.environ.get("TIERLOG_DATABASE_URL")
    if not database_url:
        from tierlog.localpg import LocalPostgres

        pg = LocalPostgres(data_dir / "postgres")
        database_url = pg.start()
        log.info("postgres started", extra={"data_dir": str(data_dir / "postgres")})
    env = dict(os.environ, TIERLOG_DATABASE_URL=database_url)
    children = []
    for i in range(1, brokers + 1):
        listen = f"127.0.0.1:{port + i - 1}"
        argv = [
            sys.executable,
            "-m",
            "tierlog",
            "broker",
            "--broker-id",
            str(i),
            "--listen",
            listen,
            "--data-dir",
            str(data_dir / f"broker-{i}"),
            "--log-level",
            log_level,
            "--default-replication-factor",
            str(min(3, brokers)),
        ]
        children.append((Child(f"broker-{i}", argv, env), f"http://{listen}"))
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        for child, _url in children:
            child.start()
        for child, url in children:
            _wait_ready(url, child)
        urls = ", ".join(url for _, url in children)
        print(
            f"tierlog dev is up: brokers at {urls} (open, no auth: loopback only). "
            f"Data in {data_dir}. Ctrl-C stops everything.",
            file=sys.stderr,
            flush=True,
        )
        while not stopping:
            time.sleep(0.5)
            for child, _url in children:
                if not stopping and child.proc is not None and child.proc.poll() is not None:
                    child.restarts += 1
                    log.warning(
                        "child exited; restarting",
                        extra={
                            "child": child.name,
                            "code": child.proc.returncode,
                            "restarts": child.restarts,
                        },
                    )
                    time.sleep(min(5.0, 0.5 * child.restarts))
                    child.start()
    except RuntimeError as exc:
        print(f"tierlog dev: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for child, _url in children:
            child.stop()
        if pg is not None:
            pg.stop()
        log.info("stopped")
    return 0
