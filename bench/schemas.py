"""The Schema Registry's look-ups by id, and produce throughput with broker-side validation.

    .venv/bin/python -m bench.schemas [--lookups 200000] [--records 400000] [--rounds 2]
    .venv/bin/python -m bench.schemas --smoke     # tiny sizes (the test suite)

Starts its own Postgres and one broker (--insecure, a Kafka listener), then:
- look-ups: `--schemas` Avro schemas registered, then GET /schema-registry/schemas/ids/{id}
  over `--connections` keep-alive connections, `--depth` requests pipelined on each, from
  one asyncio client process: the first look-up of each id (Postgres), then `--lookups`
  more (the broker's cache). Baseline, same broker, same client: GET /healthz, the
  cheapest route the broker serves; the two alternate in `--rounds` rounds. Every answer
  is checked (status, body of its id).
- produce: a confluent-kafka Producer (acks=all, linger.ms 50, batch.size 1 MB) sends
  `--records` values of ~100 B in Confluent's wire format (magic byte, a registered id,
  an Avro body) to a topic with confluent.value.schema.validation=true, and the same to
  one without it (the baseline); rounds alternate off/on so drift hits both. Checks: each
  topic's log holds exactly what was sent.
Prints requests/s (look-ups) and records/s (produce), and each case's ratio to its
baseline; the goals are >= 20,000 look-ups/s on one broker and validation >= 90% of off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import httpx
from confluent_kafka import Producer

from bench.servers import bench_postgres
from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port

REGISTRY = "/schema-registry"
V1 = {"content-type": "application/vnd.schemaregistry.v1+json"}
PRODUCER = {"acks": "all", "linger.ms": 50, "batch.size": 1_000_000, "compression.type": "none"}


class Row(NamedTuple):
    case: str
    count: int
    seconds: float
    unit: str
    baseline: str | None  # the case it is compared with


def _schema(i: int) -> str:
    fields = [{"name": "id", "type": "long"}, {"name": f"f{i}", "type": "string"}]
    return json.dumps({"type": "record", "name": f"R{i}", "namespace": "bench", "fields": fields})


async def _connection(host: str, port: int, paths: list[str], depth: int) -> list[bytes]:
    """GET every path on one keep-alive connection, `depth` in flight; the bodies."""
    reader, writer = await asyncio.open_connection(host, port)
    bodies: list[bytes] = []
    try:
        for start in range(0, len(paths), depth):
            chunk = paths[start : start + depth]
            writer.write(b"".join(f"GET {p} HTTP/1.1\r\nHost: b\r\n\r\n".encode() for p in chunk))
            for _ in chunk:
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                body = await reader.readexactly(length)
                if status != 200:
                    raise RuntimeError(f"GET answered {status}: {body[:200]!r}")
                bodies.append(body)
    finally:
        writer.close()
    return bodies


async def _hammer(url: str, paths: list[str], connections: int, depth: int) -> list[bytes]:
    host, port = url.removeprefix("http://").split(":")
    shares = [paths[i::connections] for i in range(connections)]
    done = await asyncio.gather(*(_connection(host, int(port), s, depth) for s in shares))
    # back in request order: connection i served paths i, i+connections, ...
    out: list[bytes] = [b""] * len(paths)
    for i, bodies in enumerate(done):
        out[i::connections] = bodies
    return out


def _timed_gets(url: str, paths: list[str], args: argparse.Namespace) -> tuple[float, list[bytes]]:
    t0 = time.perf_counter()
    bodies = asyncio.run(_hammer(url, paths, args.connections, args.depth))
    return time.perf_counter() - t0, bodies


def lookup_rows(broker: BrokerProcess, args: argparse.Namespace) -> list[Row]:
    http = httpx.Client(base_url=f"{broker.url}{REGISTRY}", headers=V1, timeout=30)
    ids = {}
    for i in range(args.schemas):
        r = http.post(f"/subjects/bench-{i}-value/versions", json={"schema": _schema(i)})
        r.raise_for_status()
        ids[r.json()["id"]] = _schema(i)
    cold = [f"{REGISTRY}/schemas/ids/{sid}" for sid in ids]
    cold_s, bodies = _timed_gets(broker.url, cold, args)
    hot_ids = [list(ids)[k % len(ids)] for k in range(args.lookups // args.rounds)]
    hot_paths = [f"{REGISTRY}/schemas/ids/{sid}" for sid in hot_ids]
    hot_s = base_s = 0.0
    hot_bodies: list[bytes] = []
    for _ in range(args.rounds):  # alternated, so the machine's drift hits both
        took, _ = _timed_gets(broker.url, ["/healthz"] * len(hot_paths), args)
        base_s += took
        took, got = _timed_gets(broker.url, hot_paths, args)
        hot_s += took
        hot_bodies = got
    for sid, body in [*zip(ids, bodies, strict=True), *zip(hot_ids, hot_bodies, strict=True)]:
        got = json.loads(json.loads(body)["schema"])
        assert got == json.loads(ids[sid]), (sid, got)
    http.close()
    return [
        Row("GET /healthz (baseline)", len(hot_paths) * args.rounds, base_s, "requests", None),
        Row(
            "GET /schemas/ids/{id}, cached",
            len(hot_paths) * args.rounds,
            hot_s,
            "requests",
            "GET /healthz",
        ),
        Row("GET /schemas/ids/{id}, first of each id", len(cold), cold_s, "requests", None),
    ]


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> float:
    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    failed: list[object] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    t0 = time.perf_counter()
    for v in values:
        while True:
            try:
                p.produce(topic, value=v, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let librdkafka send
                p.poll(0.05)
    assert p.flush(120) == 0
    seconds = time.perf_counter() - t0
    assert not failed, failed[:3]
    return seconds


def produce_rows(broker: BrokerProcess, bootstrap: str, args: argparse.Namespace) -> list[Row]:
    http = httpx.Client(base_url=f"{broker.url}{REGISTRY}", headers=V1, timeout=30)
    schema = _schema(10_000)
    r = http.post("/subjects/validated-value/versions", json={"schema": schema})
    r.raise_for_status()
    prefix = b"\x00" + struct.pack(">I", r.json()["id"])
    # an Avro body: the long (zig-zag varint) then the string, ~100 B in all
    values = [
        prefix + bytes([(i % 64) * 2]) + bytes([180]) + b"x" * 90 for i in range(args.records)
    ]
    broker.create_topic("validated", 1, confluent_value_schema_validation="true")
    broker.create_topic("unvalidated", 1)
    took = {"unvalidated": 0.0, "validated": 0.0}
    for _ in range(args.rounds):
        for topic in took:
            took[topic] += _produce(bootstrap, topic, values)
    for topic in took:
        end = broker.http.get(f"/topics/{topic}").json()["partitions"][0]["log_end_offset"]
        assert end == args.records * args.rounds, (topic, end)
    http.close()
    n = args.records * args.rounds
    return [
        Row(
            "produce over Kafka, validation off (baseline)", n, took["unvalidated"], "records", None
        ),
        Row(
            "produce over Kafka, validation on",
            n,
            took["validated"],
            "records",
            "produce over Kafka, validation off",
        ),
    ]


def print_table(rows: list[Row]) -> None:
    rates = {row.case: row.count / row.seconds for row in rows}
    print(f"{'case':<48} {'count':>9} {'seconds':>8} {'per s':>10} {'vs base':>8}")
    for row in rows:
        rate = rates[row.case]
        base = next(
            (v for k, v in rates.items() if row.baseline and k.startswith(row.baseline)), None
        )
        ratio = f"{rate / base:7.0%}" if base else ""
        print(f"{row.case:<48} {row.count:>9,} {row.seconds:>8.2f} {rate:>10,.0f} {ratio:>8}")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--schemas", type=int, default=100, help="schemas registered")
    parser.add_argument(
        "--lookups", type=int, default=200_000, help="cached look-ups (and baseline requests)"
    )
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--depth", type=int, default=16, help="requests in flight per connection")
    parser.add_argument("--records", type=int, default=400_000, help="per produce case and round")
    parser.add_argument("--rounds", type=int, default=2, help="alternated baseline/case rounds")
    parser.add_argument("--smoke", action="store_true", help="seconds-long run, tiny sizes")
    args = parser.parse_args()
    if args.smoke:
        args.schemas, args.lookups, args.records, args.rounds = 5, 2_000, 5_000, 1
    return args


def main() -> None:
    args = _args()
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        os.chmod(tmp, 0o755)
        pg = bench_postgres(Path(tmp) / "pg", fast=args.smoke)
        try:
            kafka = f"127.0.0.1:{free_port()}"
            broker = BrokerProcess(pg.start(), Path(tmp) / "data", 1, ["--kafka-listen", kafka])
            broker.start()
            try:
                rows = lookup_rows(broker, args) + produce_rows(broker, kafka, args)
            finally:
                broker.stop()
        finally:
            pg.stop()
    print(
        f"tierlog schema registry benchmark: 1 broker (--insecure), {os.cpu_count()} cores shared "
        f"by the client and the broker; look-ups: {args.schemas} Avro schemas, one asyncio client "
        f"process, {args.connections} keep-alive connections x {args.depth} pipelined requests; "
        f"produce: confluent-kafka Producer {PRODUCER}, {args.records:,} values of "
        f"~100 B per case and round, {args.rounds} round(s), 1 partition"
    )
    print_table(rows)
    print("every look-up answered its id's schema; each topic's log holds every record sent")


if __name__ == "__main__":
    main()
