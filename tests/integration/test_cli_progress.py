"""Long client commands say what they do: `tierlog produce` shows its progress on a terminal
and prints a summary when done and when interrupted (Ctrl-C, SIGTERM); `tierlog replay`
without --out says it is a dry run."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for
from tierlog import Admin

TIERLOG = [sys.executable, "-m", "tierlog"]


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module: each test has its own topics."""
    return module_broker


def _on_a_terminal(argv: list[str], stdin: bytes) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal: the exit code and what the terminal showed."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=slave, env=env
    )
    os.close(slave)
    shown: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the process closed the terminal
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    proc.communicate(stdin, timeout=120)
    reader.join(30)
    os.close(master)
    return proc.returncode, b"".join(shown).decode(errors="replace")


def test_produce_shows_progress_on_a_terminal_and_a_summary(broker: BrokerProcess) -> None:
    with Admin(broker.url) as admin:
        admin.create_topic("bulk", partitions=2)
    lines = b"".join(b"line %d\n" % i for i in range(20000))
    argv = [*TIERLOG, "produce", "bulk", "--batch-size", "500", "--url", broker.url]
    code, terminal = _on_a_terminal(argv, lines)
    assert code == 0, terminal
    assert "produce → bulk" in terminal and "rec/s" in terminal  # the progress display
    assert "produced 20,000 records (" in terminal and "records/s" in terminal  # the summary
    # Not on a terminal (a pipe, a log file): no progress display, the summary only.
    out = subprocess.run(
        [*argv, "--url", broker.url], input=b"one\n", capture_output=True, timeout=60
    )
    assert out.returncode == 0
    assert out.stderr.decode().startswith("produced 1 records (") and b"rec/s" not in out.stderr


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_produce_says_what_was_acknowledged(
    broker: BrokerProcess, sig: signal.Signals, code: int
) -> None:
    topic = f"cut-{sig.name.lower()}"
    with Admin(broker.url) as admin:
        admin.create_topic(topic, partitions=1)
        proc = subprocess.Popen(
            [*TIERLOG, "produce", topic, "--batch-size", "1", "--url", broker.url],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_ctrl_c_as_from_a_terminal,
        )
        assert proc.stdin is not None
        try:
            proc.stdin.write(b"a\nb\nc\n")
            proc.stdin.flush()  # and kept open: produce waits for more

            def acknowledged() -> bool:
                return admin.describe_topic(topic).partitions[0].high_watermark == 3

            wait_for("three records written", acknowledged, timeout=30)
            # The broker's high watermark moves before its answer reaches the CLI: signal it
            # once it is back to reading stdin, so the third answer has been counted.
            wait_for("produce reading stdin again", lambda: _reads_stdin(proc.pid), timeout=30)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == code
    assert err.decode().startswith(f"interrupted: 3 record(s) acknowledged by {topic} ("), err


def _ctrl_c_as_from_a_terminal() -> None:
    """In the child before exec: SIGINT at its default, as a shell's foreground job has it.
    A process inherits an ignored SIGINT (a non-interactive shell ignores it in its background
    jobs: `./scripts/test &`), and Python, as any Unix program, then leaves it ignored; the
    produce command would never see the Ctrl-C this test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _reads_stdin(pid: int) -> bool:
    """Is the process's main thread blocked in read(2) on fd 0? (x86-64 and arm64 number
    read 0 and 63; /proc/PID/syscall starts with the number and the first argument.)"""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] in ("0", "63") and int(fields[1], 16) == 0


def test_replay_without_out_says_it_is_a_dry_run(broker: BrokerProcess) -> None:
    with Admin(broker.url) as admin:
        admin.create_topic("dry", partitions=1)
        admin.produce_json("dry", [{"value": "x"}] * 5)
    out = subprocess.run(
        [*TIERLOG, "replay", "dry", "--url", broker.url], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert lines[0] == (
        "dry run: no --out, so the 5 records of dry are read and discarded (to measure the "
        "read rate); give --out FILE to keep them"
    )
    assert lines[-1].startswith("replayed 5 records (") and "(dry run: nothing kept)" in lines[-1]
