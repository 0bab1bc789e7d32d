"""The producer cases of bench/client.py: send() loops, send_batch, send_table, and the
baseline they are measured against, raw Arrow HTTP produce to each partition's leader.

Every case writes its own topic (4 partitions), 100-byte JSON values with keys, acks=all,
and checks that the log grew by exactly the records it sent. Delivery latency is from the
send call to the acknowledgement: every 64th record for send(), each call for the bulk paths.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import pyarrow as pa

from bench.produce import ARROW, values
from tierlog import Producer
from tierlog.client.delivery import BulkDelivery

PARTITIONS = 4
CHUNK = 10_000  # records per send_batch / send_table call and per raw request
SAMPLE = 64  # every SAMPLE-th send() is timed to its acknowledgement
TUNED = {"linger_ms": 20, "batch_size": 1_000_000}

Row = dict[str, object]


def records(n: int) -> tuple[list[bytes], list[bytes]]:
    return values(n), [b"user-%05d" % (i % 10_007) for i in range(n)]


def _pct(latencies: list[float], q: float) -> float:
    lat = sorted(latencies)
    return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else float("nan")


def _row(case: str, n: int, seconds: float, latencies: list[float], settings: str) -> Row:
    return {
        "case": case,
        "records_per_s": n / seconds,
        "p50_ms": _pct(latencies, 0.5),
        "p99_ms": _pct(latencies, 0.99),
        "settings": settings,
    }


def _timer(latencies: list[float], start: float) -> Callable[[object], None]:
    """A done-callback noting the time from `start` (it runs on the producer's I/O thread)."""
    return lambda _done: latencies.append(time.perf_counter() - start)


def log_end(url: str, topic: str) -> int:
    """Records in `topic`: the sum of its partitions' log end offsets."""
    with httpx.Client(base_url=url, timeout=30) as http:
        total = 0
        for p in range(PARTITIONS):
            r = http.get(f"/topics/{topic}/partitions/{p}/offsets", params={"at": "latest"})
            r.raise_for_status()
            total += int(r.json()["offset"])
    return total


def _validated(url: str, topic: str, n: int, row: Row) -> Row:
    got = log_end(url, topic)
    if got != n:
        raise SystemExit(f"{row['case']}: {got} records arrived in {topic}, {n} were sent")
    return row


def send_loop(url: str, topic: str, n: int, config: dict[str, Any]) -> Row:
    vals, keys = records(n)
    latencies: list[float] = []

    with Producer(url, **config) as producer:
        producer.send(topic, b"warm-up", key=b"w").result(30)
        start = time.perf_counter()
        for i in range(n):
            future = producer.send(topic, vals[i], key=keys[i])
            if i % SAMPLE == 0:
                future.add_done_callback(_timer(latencies, time.perf_counter()))
        producer.flush(300)
        seconds = time.perf_counter() - start
        settings = ", ".join(
            f"{k}={getattr(producer.config, k)}" for k in ("linger_ms", "batch_size")
        )
    return _validated(
        url,
        topic,
        n + 1,
        _row(f"send() {'tuned' if config else 'defaults'}", n, seconds, latencies, settings),
    )


def _bulk(
    url: str, topic: str, n: int, case: str, call: Callable[[Producer, int, int], BulkDelivery]
) -> Row:
    latencies: list[float] = []
    with Producer(url) as producer:
        producer.send(topic, b"warm-up", key=b"w").result(30)
        start = time.perf_counter()
        deliveries = []
        for lo in range(0, n, CHUNK):
            began = time.perf_counter()
            d = call(producer, lo, min(n, lo + CHUNK))
            d.add_done_callback(_timer(latencies, began))
            deliveries.append(d)
        producer.flush(300)
        seconds = time.perf_counter() - start
        failed = sum(len(d.exceptions(0)) for d in deliveries)
        if failed:
            raise SystemExit(f"{case}: {failed} records failed")
        settings = f"{CHUNK:,} records per call, defaults"
    return _validated(url, topic, n + 1, _row(case, n, seconds, latencies, settings))


def send_batch(url: str, topic: str, n: int) -> Row:
    vals, keys = records(n)
    return _bulk(
        url,
        topic,
        n,
        "send_batch",
        lambda p, lo, hi: p.send_batch(topic, vals[lo:hi], keys=keys[lo:hi]),
    )


def send_table(url: str, topic: str, n: int) -> Row:
    vals, keys = records(n)
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(vals, pa.binary())})
    return _bulk(
        url, topic, n, "send_table", lambda p, lo, hi: p.send_table(topic, table.slice(lo, hi - lo))
    )


def _leaders(url: str, topic: str) -> dict[int, str]:
    with httpx.Client(base_url=url, timeout=30) as http:
        brokers = {b["id"]: b["url"] for b in http.get("/brokers").json()["brokers"]}
        parts = http.get(f"/topics/{topic}").json()["partitions"]
    return {int(p["partition"]): brokers.get(p["leader"], url) for p in parts}


def raw_arrow(url: str, topic: str, n: int, in_flight: int = 4) -> Row:
    """The baseline: pre-encoded Arrow bodies of CHUNK records (key, value, partition) posted
    straight to their partition's leader, `in_flight` at a time, acks=all."""
    vals, keys = records(n)
    leaders = _leaders(url, topic)
    bodies: list[tuple[int, bytes, int]] = []
    for k, lo in enumerate(range(0, n, CHUNK)):
        p = k % PARTITIONS
        count = min(n, lo + CHUNK) - lo
        table = pa.table(
            {
                "key": pa.array(keys[lo : lo + count], pa.binary()),
                "value": pa.array(vals[lo : lo + count], pa.binary()),
                "partition": pa.array([p] * count, pa.int32()),
            }
        )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        bodies.append((p, sink.getvalue().to_pybytes(), count))
    latencies: list[float] = []

    async def run() -> float:
        queue = list(reversed(bodies))
        async with httpx.AsyncClient(timeout=60) as http:

            async def worker() -> None:
                while queue:
                    p, body, _count = queue.pop()
                    began = time.perf_counter()
                    r = await http.post(
                        f"{leaders[p]}/topics/{topic}/records",
                        content=body,
                        params={"acks": "all"},
                        headers={"content-type": ARROW},
                    )
                    r.raise_for_status()
                    latencies.append(time.perf_counter() - began)

            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(in_flight)))
            return time.perf_counter() - start

    seconds = asyncio.run(run())
    settings = f"{CHUNK:,} records per request, {in_flight} in flight, to leaders"
    return _validated(
        url, topic, n, _row("raw Arrow HTTP (baseline)", n, seconds, latencies, settings)
    )


def produce_cases(
    url: str, prefix: str, create: Callable[[str], object], records_send: int, records_bulk: int
) -> tuple[list[Row], str]:
    """Every producer case against `url`, each on a topic `create(name)` makes (with
    PARTITIONS partitions); returns the rows and the topic send_table wrote (what the
    consumer cases read)."""
    topics = {name: f"{prefix}-{name}" for name in ("raw", "defaults", "tuned", "batch", "table")}
    for topic in topics.values():
        create(topic)
    rows = [
        raw_arrow(url, topics["raw"], records_bulk),
        send_loop(url, topics["defaults"], records_send, {}),
        send_loop(url, topics["tuned"], records_send, TUNED),
        send_batch(url, topics["batch"], records_bulk),
        send_table(url, topics["table"], records_bulk),
    ]
    return rows, topics["table"]
