"""bench/pipeline.py's load: client processes, each a `tierlog.Producer` (acks=all) sending
`send_batch` calls of CHUNK keyed ~1 KB events on a fixed schedule, and what they were told:
every acknowledged record's partition and offset (as runs) with the time of its ack."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from bench.events import make_records
from tierlog import Producer
from tierlog.client.delivery import BulkDelivery

CHUNK = 500  # records per send_batch call
POOL = 8  # distinct chunks each client cycles through (distinct, realistic Parquet)


class Acked(NamedTuple):
    """A run of consecutive offsets of one partition acknowledged by one call."""

    partition: int
    first: int
    last: int
    acked_at: float  # time.time() of the acknowledgement


class ClientResult(NamedTuple):
    calls: int
    records: int  # acknowledged
    raw_bytes: int  # key + value bytes acknowledged
    errors: int  # records that failed
    latencies_ms: list[float]  # per call: send_batch → every record acknowledged
    acked: list[Acked]


class Load(NamedTuple):
    offered: float  # records/s asked for
    seconds: float
    records: int
    raw_bytes: int
    errors: int
    latencies_ms: list[float]
    acked: list[Acked]

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.raw_bytes / self.seconds / 1e6


def runs(partition: int, offsets: list[int], acked_at: float) -> Iterable[Acked]:
    offsets.sort()
    first = prev = offsets[0]
    for o in offsets[1:]:
        if o != prev + 1:
            yield Acked(partition, first, prev, acked_at)
            first = o
        prev = o
    yield Acked(partition, first, prev, acked_at)


def _answered(d: BulkDelivery, acked_at: float) -> tuple[list[Acked], int]:
    """The call's acknowledged runs and how many of its records failed."""
    failed = d.exceptions(0)
    metas = d.result(0) if not failed else [f.result(0) for i, f in enumerate(d) if i not in failed]
    by_partition: dict[int, list[int]] = {}
    for meta in metas:
        by_partition.setdefault(meta.partition, []).append(meta.offset)
    acked = [a for p, offs in by_partition.items() for a in runs(p, offs, acked_at)]
    return acked, len(failed)


def client(
    url: str,
    topic: str,
    rate: float,
    seconds: float,
    start_at: float,
    value_bytes: int,
    seed: int,
    out: Any,
) -> None:
    """Send CHUNK records every CHUNK/rate seconds from `start_at` for `seconds`."""
    rng = random.Random(seed)
    pool = [make_records(rng, CHUNK, value_bytes) for _ in range(POOL)]
    raw = [sum(map(len, k)) + sum(map(len, v)) for k, v in pool]
    sent: list[tuple[BulkDelivery, float, int]] = []
    answered: dict[int, tuple[float, float]] = {}  # call → (wall clock, perf counter) of its ack

    def on_done(k: int) -> Callable[[BulkDelivery], None]:
        return lambda _d: answered.__setitem__(k, (time.time(), time.perf_counter()))

    with Producer(url, acks="all") as producer:
        time.sleep(max(0.0, start_at - time.time()))
        start, n = time.time(), 0
        while (due := start + n * CHUNK / rate) < start + seconds:
            time.sleep(max(0.0, due - time.time()))
            keys, values = pool[n % POOL]
            began = time.perf_counter()
            d = producer.send_batch(topic, values, keys=keys)
            d.add_done_callback(on_done(n))
            sent.append((d, began, n % POOL))
            n += 1
        producer.flush(300)
    latencies: list[float] = []
    acked: list[Acked] = []
    records = raw_bytes = errors = 0
    for k, (d, began, chunk) in enumerate(sent):
        d.wait()
        wall, perf = answered.get(k) or (time.time(), time.perf_counter())
        latencies.append((perf - began) * 1000)
        runs_, failed = _answered(d, wall)
        acked += runs_
        errors += failed
        records += CHUNK - failed
        raw_bytes += raw[chunk] * (CHUNK - failed) // CHUNK
    out.put(ClientResult(len(sent), records, raw_bytes, errors, latencies, acked))


@contextlib.contextmanager
def _main_left_out() -> Iterator[None]:
    """Processes spawned meanwhile do not import the parent's __main__ first: `client` is all
    they run, and bench.pipeline's imports (Delta, the brokers' harness, ...) cost each one
    ~1 CPU-s more than this module's. Spawn names __main__ to its children by its module
    spec, else by its file: both hidden while the processes start."""
    main = sys.modules["__main__"]
    saved = {k: main.__dict__.pop(k) for k in ("__spec__", "__file__") if k in main.__dict__}
    main.__spec__ = None
    try:
        yield
    finally:
        del main.__spec__
        main.__dict__.update(saved)


def run_clients(
    url: str, topic: str, rate: float, seconds: float, clients: int, value_bytes: int, seed: int
) -> Load:
    """`clients` processes sharing `rate` records/s for `seconds`; their merged answers."""
    ctx = mp.get_context("spawn")  # the parent runs threads (the Delta watcher): no fork
    queue = ctx.Queue()
    start_at = time.time() + 3.0  # spawned interpreters import the client meanwhile
    procs = [
        ctx.Process(
            target=client,
            args=(url, topic, rate / clients, seconds, start_at, value_bytes, seed + i, queue),
        )
        for i in range(clients)
    ]
    with _main_left_out():
        for p in procs:
            p.start()
    results: list[ClientResult] = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    return Load(
        rate,
        seconds,
        sum(r.records for r in results),
        sum(r.raw_bytes for r in results),
        sum(r.errors for r in results),
        [x for r in results for x in r.latencies_ms],
        [a for r in results for a in r.acked],
    )
