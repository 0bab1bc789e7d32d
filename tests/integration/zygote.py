"""Start `tierlog <role>` server processes for tests: forked from a pre-imported parent
(tests/integration/zygote_server.py) instead of a fresh interpreter each, which saves each
start its imports (~0.8 CPU-s quiet, over 1 s under load; the suite starts ~250 servers).

`TIERLOG_TEST_FORK=0` starts each with `python -m tierlog` instead (`=1` forks outside pytest
too). Tests of the command line's own start-up still start it as a user does
(tests/integration/test_dev.py, test_startup_wait.py, the README's commands)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tierlog.devstack.parent_watch import child_env

ROOT = Path(__file__).resolve().parents[2]


def _fork() -> bool:
    """Under pytest, unless told not to; a benchmark (run by hand, or as a smoke run by
    test_bench_smoke.py, which says not to) starts its servers as a user would."""
    given = os.environ.get("TIERLOG_TEST_FORK")
    return given != "0" if given is not None else "PYTEST_CURRENT_TEST" in os.environ


class ForkedProcess:
    """A server forked by the zygote: the part of `subprocess.Popen`'s interface the
    harness uses. Signals go straight to the process; its exit status comes from the zygote
    (its parent), -N when signal N killed it, as Popen's."""

    def __init__(self, zygote: Zygote, pid: int, spawn: int, args: list[str]) -> None:
        self._zygote = zygote
        self.pid = pid
        self._spawn = spawn  # the zygote's number for it: pids are reused
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote.returncode(self._spawn)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.01)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # as Popen: never signal a pid that may have been reused
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The pre-imported parent, one per test process, started on first use."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        fd, log = tempfile.mkstemp(prefix="tierlog-zygote-", suffix=".log")
        self._log = Path(log)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.zygote_server", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=child_env(dict(os.environ)),  # it goes when this process goes
            cwd=ROOT,
            stdout=fd,
            stderr=subprocess.STDOUT,
        )
        theirs.close()
        os.close(fd)
        self._sock = ours
        self._replies = ours.makefile("rb")
        self._lock = threading.Lock()

    def log_tail(self) -> str:
        return f"exit status {self._proc.poll()}, " + self._log.read_text(errors="replace")[-4000:]

    def alive(self) -> bool:
        return self._proc.poll() is None

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            try:
                self._sock.sendall(json.dumps(request).encode() + b"\n")
                line = self._replies.readline()
            except OSError:
                line = b""
        if not line:
            self._proc.wait(5)
            raise RuntimeError(f"the zygote exited:\n{self.log_tail()}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def spawn(self, args: list[str], env: dict[str, str], log_path: Path) -> ForkedProcess:
        request = {"op": "spawn", "argv": args, "env": env, "cwd": os.getcwd()}
        reply = self._ask({**request, "log": str(log_path)})
        return ForkedProcess(self, int(reply["pid"]), int(reply["spawn"]), ["tierlog", *args])

    def returncode(self, spawn: int) -> int | None:
        code = self._ask({"op": "poll", "spawn": spawn})["returncode"]
        return None if code is None else int(code)


_zygote: Zygote | None = None
_start = threading.Lock()


def _start_from_a_thread_that_stays() -> Zygote:
    """The zygote's parent-death signal (PR_SET_PDEATHSIG) fires when the *thread* that
    started it ends, not the process: started from a test's short-lived thread, it and every
    server it forked would get SIGTERM with that thread. So a daemon thread that lives as
    long as this process starts it."""
    made: list[Zygote | BaseException] = []
    ready = threading.Event()

    def parent() -> None:
        try:
            made.append(Zygote())
        except BaseException as exc:
            made.append(exc)
        ready.set()
        threading.Event().wait()  # until the process ends

    threading.Thread(target=parent, name="zygote-parent", daemon=True).start()
    ready.wait()
    if isinstance(made[0], BaseException):
        raise made[0]
    return made[0]


def _the_zygote() -> Zygote:
    global _zygote
    with _start:
        if _zygote is None:
            _zygote = _start_from_a_thread_that_stays()
        elif not _zygote.alive():  # its servers went with it: a test's failure, not ours
            raise RuntimeError(f"the zygote exited:\n{_zygote.log_tail()}")
        return _zygote


def start_tierlog(
    args: list[str], env: dict[str, str], log_path: Path
) -> subprocess.Popen[bytes] | ForkedProcess:
    """`tierlog <args>` (a server role) with `env` (the whole environment, child_env's
    included), its output appended to `log_path`."""
    if _fork():
        return _the_zygote().spawn(args, env, log_path)
    with open(log_path, "ab") as logf:
        return subprocess.Popen(
            [sys.executable, "-m", "tierlog", *args], env=env, stdout=logf, stderr=subprocess.STDOUT
        )
