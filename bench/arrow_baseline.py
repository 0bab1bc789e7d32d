"""The HTTP Arrow produce baseline of bench/kafka_protocol.py: pre-encoded Arrow bodies POSTed
to each partition's leader by the same number of client processes as the Kafka case, one
keep-alive connection and one request in flight per partition (a thread each), so the
client does no per-record work and the broker's HTTP path is what is measured."""

from __future__ import annotations

import http.client
import multiprocessing as mp
import multiprocessing.synchronize
import threading
import time
from urllib.parse import urlsplit

import pyarrow as pa

from bench.produce import ARROW

Chunk = tuple[int, list[bytes], list[bytes]]  # partition, keys, values


def body(partition: int, keys: list[bytes], vals: list[bytes]) -> bytes:
    table = pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(vals, pa.binary()),
            "partition": pa.repeat(pa.scalar(partition, pa.int32()), len(keys)),
        }
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _post_all(url: str, path: str, bodies: list[tuple[bytes, int]], acked: list[int]) -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    for raw, count in bodies:
        conn.request("POST", path, body=raw, headers={"content-type": ARROW})
        resp = conn.getresponse()
        resp.read()
        if resp.status == 200:
            acked.append(count)
    conn.close()


def _client(
    leaders: dict[int, str],
    topic: str,
    chunks: list[Chunk],
    out: mp.Queue,  # type: ignore[type-arg]
    go: mp.synchronize.Event,
) -> None:
    per_partition: dict[int, list[tuple[bytes, int]]] = {}
    for p, keys, vals in chunks:
        per_partition.setdefault(p, []).append((body(p, keys, vals), len(keys)))
    path = f"/topics/{topic}/records?acks=all"
    acked: list[int] = []
    threads = [
        threading.Thread(target=_post_all, args=(leaders[p], path, bodies, acked))
        for p, bodies in per_partition.items()
    ]
    out.put(("ready", 0, 0.0))
    go.wait()
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(("done", sum(acked), time.perf_counter() - start))


def produce(
    leaders: dict[int, str], topic: str, clients: int, chunks: list[Chunk]
) -> tuple[int, float]:
    """(records acknowledged, seconds from the first request to the last answer)."""
    queue: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    shares: list[list[Chunk]] = [[] for _ in range(clients)]
    for chunk in chunks:
        shares[chunk[0] % clients].append(chunk)
    go = mp.Event()
    procs = [
        mp.Process(target=_client, args=(leaders, topic, share, queue, go)) for share in shares
    ]
    for proc in procs:
        proc.start()
    for _ in procs:  # bodies encoded before the clock starts
        queue.get(timeout=120)
    started = time.perf_counter()
    go.set()
    results = [queue.get(timeout=300) for _ in procs]
    elapsed = time.perf_counter() - started
    for proc in procs:
        proc.join()
    return sum(r[1] for r in results), elapsed
