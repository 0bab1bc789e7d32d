"""Servers forked by the tests' pre-imported parent (tests/integration/zygote.py) behave as
processes started with `python -m tierlog`: the command line's exit codes and messages, the
environment given (not the parent's), signals and Popen's exit statuses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from http_transport.trust import default_trust
from tests.integration.ports import free_port
from tests.integration.zygote import ForkedProcess, _the_zygote
from tests.integration.zygote_server import ExitCodes
from tierlog.devstack.parent_watch import child_env

ROOT = Path(__file__).resolve().parents[2]


def _fork(args: list[str], log: Path, **env: str) -> ForkedProcess:
    return _the_zygote().spawn(args, child_env({"PATH": "/usr/bin:/bin", **env}), log)


def test_a_bad_flag_exits_2_with_argparse_s_message(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    proc = _fork(["broker", "--no-such-flag"], log)
    assert proc.wait(30) == 2
    assert "unrecognized arguments: --no-such-flag" in log.read_text()


def test_the_child_reads_the_environment_it_was_given(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    port = free_port()  # nothing listens there
    proc = _fork(["topics", "list"], log, TIERLOG_URL=f"http://127.0.0.1:{port}")
    assert proc.wait(60) == 1
    out = log.read_text()
    assert "NETWORK_EXCEPTION" in out and f"127.0.0.1:{port}" in out
    assert "TIERLOG_URL's" in out  # where the URL came from: the given environment


def _serving(url: str, proc: ForkedProcess) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the console exited"
        try:
            if (
                httpx.get(
                    f"{url}/static/console.css", timeout=1, verify=default_trust()
                ).status_code
                == 200
            ):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError("the console did not serve")


# uvicorn stops gracefully on SIGTERM, then ends by the signal (as `python -m tierlog` does).
@pytest.mark.parametrize(
    ("sig", "code", "graceful"), [(signal.SIGKILL, -9, False), (signal.SIGTERM, -15, True)]
)
def test_signals_reach_the_server_and_its_exit_status_comes_back(
    tmp_path: Path, sig: signal.Signals, code: int, graceful: bool
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["console", "--broker", "http://127.0.0.1:9", "--listen", f"127.0.0.1:{port}"]
    log = tmp_path / "console.log"
    proc = _fork(args, log)
    try:
        _serving(url, proc)
        proc.send_signal(signal.SIGSTOP)
        with pytest.raises(httpx.TimeoutException):
            httpx.get(f"{url}/static/console.css", timeout=0.5)
        proc.send_signal(signal.SIGCONT)
        assert httpx.get(f"{url}/static/console.css", timeout=10).status_code == 200
        proc.send_signal(sig)
        assert proc.wait(30) == code
        assert ("Application shutdown complete" in log.read_text()) == graceful
    finally:
        proc.kill()


def test_the_parent_is_its_only_thread_after_its_imports() -> None:
    """It forks only then (each fork checks): pyarrow's and numpy's imports start no thread."""
    script = (
        "from tests.integration.zygote_server import _preload, other_threads\n"
        "_preload()\n"
        "print(other_threads())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS",)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_reused_pid_does_not_inherit_the_exit_code_of_its_earlier_owner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fetch node forked with the pid of a server reaped earlier in the run read as exited
    at once (an empty log): the kernel had reused the pid, the zygote still held its code.
    Each spawn is numbered: the old one keeps its code, the new one has none yet."""
    waits = iter([(4242, 3 << 8)])  # pid 4242 exited 3

    def waitpid(pid: int, options: int) -> tuple[int, int]:
        assert (pid, options) == (-1, os.WNOHANG)
        try:
            return next(waits)
        except StopIteration:
            raise ChildProcessError from None

    monkeypatch.setattr(os, "waitpid", waitpid)
    exits = ExitCodes()
    old = exits.forked(4242)
    exits.reap()
    new = exits.forked(4242)  # the kernel gave a new child the same pid
    assert (exits.of(old), exits.of(new)) == (3, None)
