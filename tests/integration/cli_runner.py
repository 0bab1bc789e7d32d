"""Client commands of `tierlog` run in the test's own process.

The parser and command functions `python -m tierlog` runs (tierlog/cli/commands.py), with
stdin, stdout and stderr as bytes, as a process has them, but without a new interpreter's
start-up: its imports (httpx, pyarrow, the client) are most of a short command's CPU, about
0.6 s each. For tests of what a command does; the entry point itself (tierlog/cli/main.py:
--version, help, the `tierlog: CODE: message` error line and exit code, signals) is tested
through real processes."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import threading

from tierlog.cli.commands import add_client_commands


def run_command(
    *args: str, stdin: bytes = b"", timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """Run `tierlog ARGS`; assert it returned 0 (with its stderr as the message)."""
    parser = argparse.ArgumentParser(prog="tierlog")
    add_client_commands(parser.add_subparsers(dest="command", required=True), "http://unset")
    parsed = parser.parse_args(list(args))
    # Text streams over bytes, as a process's are (commands read and write .buffer); held
    # here, since a collected wrapper closes its buffer.
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    stdin_text = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    codes: list[int] = []

    def run() -> None:
        saved = sys.stdin
        sys.stdin = stdin_text
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                codes.append(int(parsed.func(parsed) or 0))
        finally:
            sys.stdin = saved

    # A thread, so a command that never ends fails the test instead of hanging it.
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    assert codes == [0], (args, codes, err.getvalue().decode(errors="replace"))
    return subprocess.CompletedProcess(list(args), 0, out.getvalue(), err.getvalue())
