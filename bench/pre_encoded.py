"""Pre-encoded produce requests for bench/kafka_protocol.py, HTTP Arrow and Kafka wire alike:
the same 10,000-record chunks, encoded before the clock starts, sent by as many client
processes as the confluent-kafka case, one connection and one request in flight per
partition (a thread each), to the partition's leader. The client does no per-record work,
so the broker's path (HTTP Arrow produce, or the Kafka listener) is what is measured."""

from __future__ import annotations

import http.client
import io
import multiprocessing as mp
import multiprocessing.synchronize
import resource
import socket
import struct
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlsplit

import pyarrow as pa
from kio.schema.produce.v7.request import PartitionProduceData, TopicProduceData
from kio.schema.produce.v7.request import ProduceRequest as ProduceRequestV7
from kio.schema.produce.v7.response import ProduceResponse as ProduceResponseV7
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records, i16, i32, i32Timedelta

from bench.produce import ARROW
from ingest.kafka.record_batch import encode_batch
from logformat.schema import CONSUMER_SCHEMA

Chunk = tuple[int, list[bytes], list[bytes]]  # partition, keys, values
# Per partition: where its leader listens (an HTTP URL, or host:port of its Kafka listener).
Leaders = dict[int, str]
Send = Callable[[str, str, list[tuple[bytes, int]], list[int]], None]


def _cpu_s() -> float:
    """CPU seconds of this process, all its threads (librdkafka's too)."""
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def arrow_body(partition: int, keys: list[bytes], vals: list[bytes]) -> bytes:
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


def _post_all(url: str, topic: str, bodies: list[tuple[bytes, int]], acked: list[int]) -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    for raw, count in bodies:
        conn.request(
            "POST", f"/topics/{topic}/records?acks=all", body=raw, headers={"content-type": ARROW}
        )
        resp = conn.getresponse()
        resp.read()
        if resp.status == 200:
            acked.append(count)
    conn.close()


def kafka_request(topic: str, partition: int, keys: list[bytes], vals: list[bytes]) -> bytes:
    """A Produce v7 frame (acks=all) of one RecordBatch v2, as librdkafka would send it."""
    now = int(time.time() * 1000)
    rows = pa.RecordBatch.from_pydict(
        {
            "offset": pa.array(range(len(keys)), pa.int64()),
            "timestamp": pa.array([now] * len(keys), pa.int64()).cast(
                CONSUMER_SCHEMA.field("timestamp").type
            ),
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(vals, pa.binary()),
            "headers": pa.nulls(len(keys), CONSUMER_SCHEMA.field("headers").type),
        },
        schema=CONSUMER_SCHEMA,
    )
    data = PartitionProduceData(
        index=i32(partition), records=Records(encode_batch(rows, 0, len(keys)))
    )
    req = ProduceRequestV7(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(timedelta(seconds=30)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(data,)),),
    )
    body = io.BytesIO()
    entity_writer(ProduceRequestV7)(body, req)
    frame = struct.pack(">hhih", 0, 7, 0, 5) + b"bench" + body.getvalue()
    return struct.pack(">i", len(frame)) + frame


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
    return bytes(buf)


def _send_all(address: str, _topic: str, frames: list[tuple[bytes, int]], acked: list[int]) -> None:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        for raw, count in frames:
            sock.sendall(raw)
            (size,) = struct.unpack(">i", recv_exactly(sock, 4))
            answer = recv_exactly(sock, size)
            resp, _ = entity_reader(ProduceResponseV7)(answer, 4)  # after the correlation id
            if resp.responses[0].partition_responses[0].error_code == 0:
                acked.append(count)


def _client(
    send: Send,
    encode: Callable[[str, int, list[bytes], list[bytes]], bytes],
    leaders: Leaders,
    topic: str,
    chunks: list[Chunk],
    out: mp.Queue,  # type: ignore[type-arg]
    go: multiprocessing.synchronize.Event,
) -> None:
    per_partition: dict[int, list[tuple[bytes, int]]] = {}
    for p, keys, vals in chunks:
        per_partition.setdefault(p, []).append((encode(topic, p, keys, vals), len(keys)))
    acked: list[int] = []
    threads = [
        threading.Thread(target=send, args=(leaders[p], topic, requests, acked))
        for p, requests in per_partition.items()
    ]
    out.put(("ready", 0, 0.0, 0.0))
    go.wait()
    start, cpu = time.perf_counter(), _cpu_s()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(("done", sum(acked), time.perf_counter() - start, _cpu_s() - cpu))


def produce(
    kind: str, leaders: Leaders, topic: str, clients: int, chunks: list[Chunk]
) -> tuple[int, float, float]:
    """(records acknowledged, seconds from the first request to the last answer, the client
    processes' CPU seconds meanwhile); `kind` "http" (leaders: URLs) or "kafka" (leaders:
    Kafka listener addresses)."""
    send, encode = (
        (_post_all, lambda _t, p, k, v: arrow_body(p, k, v))
        if kind == "http"
        else (_send_all, kafka_request)
    )
    queue: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    shares: list[list[Chunk]] = [[] for _ in range(clients)]
    for chunk in chunks:
        shares[chunk[0] % clients].append(chunk)
    go = mp.Event()
    procs = [
        mp.Process(target=_client, args=(send, encode, leaders, topic, share, queue, go))
        for share in shares
    ]
    for proc in procs:
        proc.start()
    for _ in procs:  # requests encoded before the clock starts
        queue.get(timeout=120)
    started = time.perf_counter()
    go.set()
    results = [queue.get(timeout=300) for _ in procs]
    elapsed = time.perf_counter() - started
    for proc in procs:
        proc.join()
    return sum(r[1] for r in results), elapsed, sum(r[3] for r in results)
