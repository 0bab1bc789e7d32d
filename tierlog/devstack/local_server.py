"""What the local servers of `tierlog dev` share (localpg's Postgres, local_s3's SeaweedFS, the
supervisor's children): a data dir held by one process (flock), free loopback ports, waiting
for a process to become ready, stopping it with escalating signals, and its log's last lines.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from enum import Enum
from pathlib import Path
from typing import Self


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (all held open together while picking)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As weed's (Go's) listeners do: a port in TIME_WAIT after our last run is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class Readiness(Enum):
    READY = "ready"
    EXITED = "exited"
    TIMED_OUT = "timed out"


def wait_ready(
    proc: subprocess.Popen[bytes], ready: Callable[[], bool], deadline: float, interval: float
) -> Readiness:
    """Probe `ready()` until it says yes, the process exits, or time.monotonic() passes
    `deadline`."""
    while True:
        if proc.poll() is not None:
            return Readiness.EXITED
        if ready():
            return Readiness.READY
        if time.monotonic() > deadline:
            return Readiness.TIMED_OUT
        time.sleep(interval)


def stop_process(
    proc: subprocess.Popen[bytes] | None, steps: Sequence[tuple[signal.Signals, float | None]]
) -> None:
    """Send each signal in turn, waiting its time (None: for ever) for the process to exit."""
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in steps:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def log_tail(path: Path, lines: int = 30, since: int = 0) -> str:
    """The last `lines` lines of the log at `path`, from byte `since` on."""
    try:
        with open(path, "rb") as f:
            f.seek(since)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


class LocalServer:
    """A server over a data dir that one process at a time may run: the flock is held from
    start() to stop(); `with server:` starts and stops it."""

    _lock_fd: int | None = None

    def start(self) -> object:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def _lock(self, path: Path, mode: int, busy: Exception) -> None:
        """Hold `path`'s flock, or raise `busy` if another process holds it."""
        if self._lock_fd is not None:
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise busy from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
