"""CPU seconds of process trees, from Linux's /proc: where a benchmark's CPU went, by role.

    meter = CpuMeter({"JVM": (jvm, "own"), "Python": (jvm, "children"), "S3": (weed, "tree")})
    before = meter.sample(); run(); spent = meter.since(before)   # {"JVM": 3.1, ...}

A process's time is user + system of all its threads; a descendant counts too what its
reaped children used (cutime + cstime): Spark's Python workers are forked by pyspark.daemon,
which reaps them. Where /proc is missing, samples are empty and `since` gives {}.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU seconds, reaped children's CPU seconds) of `pid`."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after "pid (comm)": state is fields[0]
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, (utime + stime) / _TICK, (cutime + cstime) / _TICK


def _processes() -> dict[int, tuple[int, float, float]]:
    out = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                out[int(entry.name)] = st
    return out


class CpuMeter:
    """`roles`: name → (pid, what): "own" (the process alone, all its threads), "children"
    (its descendants, not itself) or "tree" (both)."""

    def __init__(self, roles: Mapping[str, tuple[int, str]]) -> None:
        self.roles = dict(roles)

    def sample(self) -> dict[str, float]:
        procs = _processes()
        kids: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in procs.items():
            kids.setdefault(ppid, []).append(pid)
        out = {}
        for name, (root, what) in self.roles.items():
            if root not in procs:
                continue
            total = procs[root][1] if what != "children" else 0.0
            todo = list(kids.get(root, ())) if what != "own" else []
            if what == "tree":
                total += procs[root][2]
            while todo:
                p = todo.pop()
                total += procs[p][1] + procs[p][2]
                todo.extend(kids.get(p, ()))
            out[name] = total
        return out

    def since(self, before: Mapping[str, float]) -> dict[str, float]:
        now = self.sample()
        return {k: now[k] - before[k] for k in now if k in before}
