"""A small closed-loop HTTP load generator: client processes, each one keep-alive connection."""

from __future__ import annotations

import http.client
import multiprocessing as mp
import time
from typing import NamedTuple


class LoadResult(NamedTuple):
    requests: int
    records: int
    body_bytes: int
    seconds: float
    latencies_ms: list[float]
    errors: int

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.body_bytes / self.seconds / 1e6

    def pct(self, q: float) -> float:
        lat = sorted(self.latencies_ms)
        return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")


def _client(port: int, path: str, body: bytes, ctype: str, seconds: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"content-type": ctype, "content-length": str(len(body))}
    lat: list[float] = []
    errors = 0
    end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        if t0 >= end:
            break
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            errors += 1
        lat.append((time.perf_counter() - t0) * 1000)
    out.put((lat, errors))


def run_load(
    port: int,
    path: str,
    body: bytes,
    ctype: str,
    records_per_request: int,
    clients: int,
    seconds: float,
) -> LoadResult:
    queue: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    procs = [
        mp.Process(target=_client, args=(port, path, body, ctype, seconds, queue))
        for _ in range(clients)
    ]
    start = time.perf_counter()
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    lat = [x for r in results for x in r[0]]
    errors = sum(r[1] for r in results)
    ok = len(lat) - errors
    return LoadResult(len(lat), ok * records_per_request, ok * len(body), elapsed, lat, errors)
