"""Where a replay's CPU goes (bench/replay.py): the CPU seconds the S3 server, the node
serving the replay and the reader (this process) spend per GB read, measured from /proc
(bench/cpu_meter.py) around one stretch, and the table of them."""

from __future__ import annotations

import os
import time
from typing import NamedTuple

from bench.cpu_meter import CpuMeter


class CpuSplit(NamedTuple):
    """CPU seconds each process spent over one measured stretch, and its wall time."""

    s3: float
    server: float  # the node serving the replay (0 for the raw GETs)
    reader: float  # this process: the replaying consumer, or the raw GETs
    wall: float

    def per_gb(self, nbytes: int) -> tuple[float, float, float, float]:
        gb = nbytes / 1e9
        return self.s3 / gb, self.server / gb, self.reader / gb, self.total / gb

    @property
    def total(self) -> float:
        return self.s3 + self.server + self.reader


class ReplayCpu:
    """Measures a CpuSplit: `with ReplayCpu(s3_pid, server_pid) as m: ...; m.split`."""

    def __init__(self, s3_pid: int, server_pid: int | None) -> None:
        roles = {"s3": (s3_pid, "own"), "reader": (os.getpid(), "own")}
        if server_pid:
            roles["server"] = (server_pid, "own")
        self.meter = CpuMeter(roles)
        self.split = CpuSplit(0.0, 0.0, 0.0, 0.0)

    def __enter__(self) -> ReplayCpu:
        self._before, self._started = self.meter.sample(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        spent = self.meter.since(self._before)
        wall = time.perf_counter() - self._started
        self.split = CpuSplit(
            spent.get("s3", 0.0), spent.get("server", 0.0), spent.get("reader", 0.0), wall
        )


def cpu_table(rows: list[tuple[str, CpuSplit, int]]) -> None:
    """Where the CPU goes, per GB of Parquet read, and the cores the three processes kept
    busy: a case well under the machine's cores is bound by its serial chain (one consumer,
    one answer at a time), not by the CPU."""
    head = f"{'S3':>6} {'server':>7} {'reader':>7} {'total':>6} {'cores':>6}"
    print(f"\n{'CPU s per GB read':<34} {head}")
    for name, split, nbytes in rows:
        s3, server, reader, total = split.per_gb(nbytes)
        print(
            f"{name:<34} {s3:>6.2f} {server:>7.2f} {reader:>7.2f} {total:>6.2f} "
            f"{split.total / split.wall:>6.2f}"
        )
    print(
        "(S3: the SeaweedFS process; server: the node answering the replay; reader: this "
        "process, which GETs the raw ranges or reads and checks the replay; cores: CPU seconds "
        "of the three per second of wall time)"
    )
