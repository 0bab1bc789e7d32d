"""bench/pipeline.py's observations: the brokers' tiering lag, a watcher of the Delta table's
versions (which offsets of each partition are readable there, and since when), the
freshness they give, and the exactly-once check of the table at the end."""

from __future__ import annotations

import bisect
import re
import threading
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from bench.pipeline_load import Acked
from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import PARTITION_COLUMN
from tests.integration.brokers import BrokerProcess

_METRIC = re.compile(r"^(tierlog_remote_copy_lag_(?:bytes|seconds))\{(.*)\} (\S+)$")


class LagSample(NamedTuple):
    t: float
    bytes: int  # sealed bytes not yet tiered, summed over partitions (the most any replica has)
    seconds: float  # age of the oldest such segment


def lag_of(brokers: Sequence[BrokerProcess], topic: str, t: float) -> LagSample:
    """The brokers' tierlog_remote_copy_lag_bytes/_seconds of `topic`: per partition the
    largest any replica reports (followers seal a little later than the leader)."""
    nbytes: dict[str, float] = {}
    age = 0.0
    for b in brokers:
        try:
            text = b.http.get("/metrics").text
        except Exception:  # a broker between restarts: the others still report
            continue
        for line in text.splitlines():
            m = _METRIC.match(line)
            if m is None or f'topic="{topic}"' not in m.group(2):
                continue
            value = float(m.group(3))
            if m.group(1).endswith("bytes"):
                part = re.search(r'partition="(\d+)"', m.group(2))
                key = part.group(1) if part else ""
                nbytes[key] = max(nbytes.get(key, 0.0), value)
            else:
                age = max(age, value)
    return LagSample(t, int(sum(nbytes.values())), age)


class DeltaWatcher:
    """Polls the table every `every_s`; notes when each partition's highest readable offset
    (the files' max offset statistics) moved."""

    def __init__(self, uri: str, storage_options: dict[str, str], every_s: float = 0.25) -> None:
        self._every_s = every_s
        self._table = DeltaTopicTable(uri, storage_options)
        self._history: dict[int, list[tuple[int, float]]] = {}  # partition → (covered, seen at)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delta-watcher", daemon=True)
        self.errors = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                if not self._table.exists():
                    continue
                files = self._table.files()
            except Exception:
                self.errors += 1  # a version being written: the next poll sees it
                continue
            now = time.time()
            for f in files:
                if f.max_offset is None:
                    continue
                seen = self._history.setdefault(f.partition, [])
                if not seen or f.max_offset > seen[-1][0]:
                    seen.append((f.max_offset, now))

    def covered(self) -> dict[int, int]:
        return {p: h[-1][0] for p, h in self._history.items() if h}

    def history(self) -> dict[int, list[tuple[int, float]]]:
        return {p: list(h) for p, h in self._history.items()}


def freshness(acked: list[Acked], history: dict[int, list[tuple[int, float]]]) -> list[float]:
    """Per acknowledged run: seconds from its ack until a table version held its last offset."""
    out = []
    for a in acked:
        seen = history.get(a.partition, [])
        i = bisect.bisect_left([c for c, _ in seen], a.last)
        if i == len(seen):
            raise SystemExit(f"offset {a.last} of partition {a.partition} never reached Delta")
        out.append(max(0.0, seen[i][1] - a.acked_at))
    return out


def check_exactly_once(
    uri: str, storage_options: dict[str, str], ends: dict[int, int], partitions: int
) -> int:
    """Each partition's offsets in the table are exactly 0..n-1 (no gap, no duplicate) and
    cover its last acknowledged offset; returns the records in the table."""
    table = DeltaTable(uri, storage_options=storage_options)
    rows: pa.Table = table.to_pyarrow_table(columns=[PARTITION_COLUMN, "offset"])
    total = 0
    for p in range(partitions):
        offsets = rows.filter(pc.equal(rows[PARTITION_COLUMN], p))["offset"]
        n = len(offsets)
        distinct = len(pc.unique(offsets))
        lo: Any = pc.min(offsets).as_py() if n else None
        hi: Any = pc.max(offsets).as_py() if n else None
        if n and (distinct != n or lo != 0 or hi != n - 1):
            raise SystemExit(
                f"partition {p}: {n} rows, {distinct} distinct offsets in [{lo}, {hi}]"
            )
        if ends.get(p, -1) >= n:
            raise SystemExit(f"partition {p}: acknowledged offset {ends[p]} not in the table")
        total += n
    return total
