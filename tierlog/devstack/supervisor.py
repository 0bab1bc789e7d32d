"""The supervisor of `tierlog dev`: starts its children (brokers, the fetch node, the
workers), each its own process as in production, restarts one that dies, and stops them all
in start order."""

from __future__ import annotations

import logging
import signal
import subprocess
import time

import httpx

from tierlog.devstack.local_server import Readiness, stop_process, wait_ready
from tierlog.devstack.parent_watch import child_env

log = logging.getLogger("tierlog.devstack.dev")


class Child:
    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name, self.argv, self.env = name, argv, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, env=child_env(self.env))

    def stop(self, timeout: float = 10) -> None:
        stop_process(self.proc, ((signal.SIGTERM, timeout), (signal.SIGKILL, None)))

    def wait_ready(self, url: str, timeout: float = 60) -> None:
        def answers() -> bool:
            try:
                return httpx.get(f"{url}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        assert self.proc is not None
        outcome = wait_ready(self.proc, answers, time.monotonic() + timeout, 0.2)
        if outcome is Readiness.EXITED:
            raise RuntimeError(
                f"{self.name} exited with code {self.proc.returncode} while starting"
            )
        if outcome is Readiness.TIMED_OUT:
            raise RuntimeError(f"{self.name} was not ready at {url} within {timeout:.0f}s")


class Supervisor:
    """Starts the children, restarts one that dies until told to stop, then stops them all
    in start order (brokers first, then the fetch node and the workers)."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self.stopping = False

    def on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True

    def start_ready(self, children: list[tuple[Child, str]]) -> None:
        """Start every child, then wait until each is ready at its URL (/readyz)."""
        for child, _url in children:
            self.start(child)
        for child, url in children:
            child.wait_ready(url)

    def start(self, child: Child) -> None:
        self.children.append(child)
        child.start()

    def watch(self) -> None:
        while not self.stopping:
            time.sleep(0.5)
            for child in self.children:
                if not self.stopping and child.proc is not None and child.proc.poll() is not None:
                    self._restart(child)

    def _restart(self, child: Child) -> None:
        assert child.proc is not None
        child.restarts += 1
        log.warning(
            "child exited; restarting",
            extra={"child": child.name, "code": child.proc.returncode, "restarts": child.restarts},
        )
        time.sleep(min(5.0, 0.5 * child.restarts))
        child.start()

    def stop_all(self) -> None:
        for child in self.children:
            child.stop()
