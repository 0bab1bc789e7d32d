"""The supervisor of `tierlog dev`: starts its children (brokers, the fetch node, the
workers), each its own process as in production, restarts one that dies, and stops them all
in start order.

A child that dies is started again after 1 s, then 2 s and 4 s while it keeps failing fast
(exiting before it ever answered /readyz, or within FAST_EXIT_S of its start), never later
than RESTART_WITHIN_S;
TIERLOG_DEV_RESTART_DELAY_MS sets the first delay (tests shorten it). After
GIVE_UP_AFTER fast failures in a row something is wrong that restarting will not fix (a port
taken by another process, a broken data dir): the supervisor says which child and why it
thinks so, and gives up rather than loop for ever. Readiness, not only the clock, decides
what "fast" is: on a loaded machine a server's start-up alone can take longer than
FAST_EXIT_S, and a child that dies before it serves has failed to start however long that took.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from collections.abc import Mapping

import httpx

from tierlog.devstack.local_server import Readiness, port_free, stop_process, wait_ready
from tierlog.devstack.parent_watch import child_env

log = logging.getLogger("tierlog.devstack.dev")

FAST_EXIT_S = 10.0
GIVE_UP_AFTER = 3
RESTART_WITHIN_S = 5
RESTART_DELAY_ENV = "TIERLOG_DEV_RESTART_DELAY_MS"


def restart_delay_s(environ: Mapping[str, str]) -> float:
    """The first restart delay, from RESTART_DELAY_ENV (milliseconds; 1 s when unset)."""
    raw = environ.get(RESTART_DELAY_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        ms = int(raw)
    except ValueError:
        ms = -1
    if not 0 <= ms <= RESTART_WITHIN_S * 1000:
        raise ValueError(
            f"{RESTART_DELAY_ENV}={raw!r} is not a whole number of milliseconds "
            f"from 0 to {RESTART_WITHIN_S * 1000}"
        )
    return ms / 1000


class GaveUp(RuntimeError):
    """A child kept failing as soon as it started."""


class Child:
    """One process of dev: its command, environment and, for a server, its port."""

    def __init__(
        self, name: str, argv: list[str], env: dict[str, str], port: int | None = None
    ) -> None:
        self.name, self.argv, self.env, self.port = name, argv, env, port
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.ready = False  # answered /readyz since its last start (servers only)
        self.restarts = 0
        self.fast_failures = 0  # in a row

    def start(self) -> None:
        self.started_at = time.monotonic()
        self.ready = False
        self.proc = subprocess.Popen(self.argv, env=child_env(self.env))

    def exited(self) -> None:
        """Count this exit: fast if it came before the server was ready or soon after the
        start."""
        unready = self.port is not None and not self.ready
        quick = unready or time.monotonic() - self.started_at < FAST_EXIT_S
        self.fast_failures = self.fast_failures + 1 if quick else 0
        self.restarts += 1

    def why(self) -> str:
        """Why it keeps failing, as far as the supervisor can tell."""
        assert self.proc is not None
        code = self.proc.returncode
        cause = f"last exit code {code}"
        if self.port is not None and not port_free(self.port):
            cause += f"; port {self.port} is in use by another process"
        return (
            f"{self.name} exited {self.fast_failures} times in a row before it was ready or "
            f"within {FAST_EXIT_S:.0f}s of starting ({cause}); giving up"
        )

    def stop(self, timeout: float = 10) -> None:
        stop_process(self.proc, ((signal.SIGTERM, timeout), (signal.SIGKILL, None)))

    def answers(self, timeout: float = 1) -> bool:
        """Whether the server answers /readyz with 200 now (remembered until its next start)."""
        if self.port is None:
            return False
        try:
            url = f"http://127.0.0.1:{self.port}/readyz"
            self.ready = self.ready or httpx.get(url, timeout=timeout).status_code == 200
        except httpx.HTTPError:
            pass
        return self.ready

    def wait_ready(self, url: str, timeout: float = 60) -> None:
        def answers() -> bool:
            try:
                ok = httpx.get(f"{url}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False
            self.ready = self.ready or ok
            return ok

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

    def __init__(self, first_delay_s: float = 1.0) -> None:
        self.first_delay_s = first_delay_s  # doubled at each fast failure in a row
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
                if self.stopping or child.proc is None:
                    continue
                if child.proc.poll() is not None:
                    self._restart(child)
                elif not child.ready:  # a restarted server: has it come up yet?
                    child.answers(timeout=0.5)

    def _restart(self, child: Child) -> None:
        assert child.proc is not None
        child.exited()
        if child.fast_failures >= GIVE_UP_AFTER:
            raise GaveUp(child.why())
        delay = min(float(RESTART_WITHIN_S), self.first_delay_s * 2.0**child.fast_failures)
        log.warning(
            "child exited; restarting",
            extra={
                "child": child.name,
                "code": child.proc.returncode,
                "restarts": child.restarts,
                "delay_s": delay,
            },
        )
        time.sleep(delay)
        if not self.stopping:
            child.start()

    def stop_all(self) -> None:
        for child in self.children:
            child.stop()
