"""What bench/replay.py measures beside the replays: the cold caches' counters, read from the
fetch node's Prometheus metrics, and the raw limit of the S3 endpoint (ranged GETs, no decoding).
"""

from __future__ import annotations

import asyncio
import os
import re
import time

import httpx

from coldstore.object_store import AsyncObjectStore, ObjectStoreConfig


def metric(http: httpx.Client, name: str, label: str = "") -> float:
    """The sum of a metric's samples (those whose labels hold `label`, e.g. 'cache="range"')."""
    text = http.get("/metrics").text
    pattern = re.compile(rf"^{name}(?:\{{([^}}]*)\}})? (\S+)$")
    return sum(
        float(m.group(2))
        for line in text.splitlines()
        if (m := pattern.match(line)) and label in (m.group(1) or "")
    )


CACHE_METRICS = (
    ("tierlog_cold_cache_hits_total", 'cache="range"'),
    ("tierlog_cold_cache_misses_total", 'cache="range"'),
    ("tierlog_cold_cache_hits_total", 'cache="row_group"'),
    ("tierlog_cold_cache_misses_total", 'cache="row_group"'),
    ("tierlog_cold_prefetch_bytes_total", ""),
    ("tierlog_cold_prefetch_used_bytes_total", ""),
)


def cache_counters(http: httpx.Client) -> list[float]:
    return [metric(http, name, label) for name, label in CACHE_METRICS]


def cache_rates(before: list[float], after: list[float]) -> tuple[float, float, float]:
    """(range-cache hit rate, decoded-row-group hit rate, share of prefetched bytes used)."""
    d = [a - b for a, b in zip(after, before, strict=True)]

    def share(x: float, y: float) -> float:
        return x / y if y else float("nan")

    return share(d[0], d[0] + d[1]), share(d[2], d[2] + d[3]), share(d[5], d[4])


def raw_limit(files: list[tuple[str, int]], concurrency: int, chunk: int) -> tuple[float, int, int]:
    """(seconds, bytes, GETs) to GET every byte of `files`, `concurrency` ranged GETs at once."""

    async def run() -> tuple[float, int, int]:
        ranges = [(k, s, min(s + chunk, size)) for k, size in files for s in range(0, size, chunk)]
        async with AsyncObjectStore(ObjectStoreConfig.from_env(os.environ)) as store:
            sem = asyncio.Semaphore(concurrency)
            total = 0

            async def get(key: str, start: int, end: int) -> None:
                nonlocal total
                async with sem:
                    data = await store.get_range(key, start, end)
                total += len(data)  # after the await: `total += await ...` loses updates

            started = time.perf_counter()
            await asyncio.gather(*(get(*r) for r in ranges))
            return time.perf_counter() - started, total, len(ranges)

    return asyncio.run(run())
