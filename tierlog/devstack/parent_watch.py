"""Child processes that go when their parent does.

`tierlog dev` (and the test harness) put their pid in TIERLOG_PARENT_PID for the tierlog
processes they start. Such a process asks Linux for SIGTERM when its parent dies
(PR_SET_PDEATHSIG), so a `kill -9` of `tierlog dev` shuts its brokers, fetch node and workers
down cleanly instead of leaving them orphaned and holding ports. The variable is taken out of
the environment, so the process's own children get their parent's pid only if it sets it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

ENV = "TIERLOG_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def child_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a tierlog child of this process: it will stop when this process dies."""
    return {**env, ENV: str(os.getpid())}


def die_with_parent() -> None:
    raw = os.environ.pop(ENV, None)
    if not raw or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        return  # not fatal: only the clean-up after a killed parent is lost
    if os.getppid() != int(raw):  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)
