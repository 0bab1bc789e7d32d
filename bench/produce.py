"""Produce throughput of one broker (acks=1): Arrow and JSON paths against a bare baseline.

    .venv/bin/python -m bench.produce [--seconds 8] [--clients 4] [--batch 1000]
    .venv/bin/python -m bench.produce --smoke     # 0.25 s per case, 1 client (the test suite)

Starts its own Postgres, one broker and the baseline server on loopback, then prints
records/s, MB/s and p50/p99 request latency for each, and the Arrow/baseline ratio. Checks
that the broker's log holds every record it acknowledged.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson
import pyarrow as pa

from bench.load import LoadResult, run_load
from bench.servers import bench_postgres
from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port

ARROW = "application/vnd.apache.arrow.stream"


def values(n: int) -> list[bytes]:
    # ~100-byte JSON values, each different, as an application would send.
    return [
        orjson.dumps(
            {
                "user": f"u{i % 997:04d}",
                "event": "page_view",
                "ok": True,
                "seq": i,
                "path": f"/products/{i % 5000:05d}",
                "ms": 1_700_000_000_000 + i,
            }
        )
        for i in range(n)
    ]


def arrow_body(vals: list[bytes]) -> bytes:
    table = pa.table({"value": pa.array(vals, pa.binary())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def json_body(vals: list[bytes]) -> bytes:
    return orjson.dumps({"records": [{"value": orjson.loads(v)} for v in vals]})


def _wait(url: str) -> None:
    for _ in range(200):
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} never became ready")


def row(name: str, r: LoadResult, base: LoadResult | None) -> str:
    ratio = f"{r.records_per_s / base.records_per_s:6.0%}" if base else "     -"
    return (
        f"{name:<22} {r.records_per_s:>12,.0f} {r.mb_per_s:>8.1f} {r.pct(0.5):>8.2f} "
        f"{r.pct(0.99):>8.2f} {r.requests:>8} {r.errors:>6} {ratio}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true", help="1 client, 0.25 s per case")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.clients = 0.25, 1
    vals = values(args.batch)
    bodies = {"arrow": arrow_body(vals), "json": json_body(vals)}
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        os.chmod(tmp, 0o755)
        pg = bench_postgres(Path(tmp) / "pg", fast=args.smoke)  # --no-sync: only the smoke
        url = pg.start()
        broker = BrokerProcess(url, Path(tmp) / "broker").start()
        broker.create_topic("bench", partitions=1)
        port = free_port()
        baseline = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.baseline_server",
                "--port",
                str(port),
                "--file",
                str(Path(tmp) / "baseline.bin"),
            ]
        )
        try:
            _wait(f"http://127.0.0.1:{port}/readyz")
            print(
                f"tierlog produce benchmark: 1 broker, acks=1, {args.batch} records/request "
                f"(~{len(vals[0])} B JSON values), {args.clients} client processes, "
                f"{args.seconds:g} s per case, {os.cpu_count()} cores shared by clients and server"
            )
            print(
                f"request bodies: arrow {len(bodies['arrow']):,} B, json {len(bodies['json']):,} B"
            )
            results: dict[str, LoadResult] = {}
            acknowledged = 0  # records the broker answered 200 for, warm-ups included
            cases = [
                ("baseline (arrow body)", port, "arrow"),
                ("tierlog arrow", broker.port, "arrow"),
                ("tierlog json", broker.port, "json"),
            ]
            for name, target, kind in cases:
                ctype = ARROW if kind == "arrow" else "application/json"
                load = functools.partial(
                    run_load,
                    target,
                    "/topics/bench/records?acks=1",
                    bodies[kind],
                    ctype,
                    args.batch,
                    args.clients,
                )
                warm = load(min(1.0, args.seconds))
                results[name] = load(args.seconds)
                if target == broker.port:
                    acknowledged += warm.records + results[name].records
            print(
                f"\n{'case':<22} {'records/s':>12} {'MB/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
                f"{'requests':>8} {'errors':>6} vs base"
            )
            base = results["baseline (arrow body)"]
            for name, r in results.items():
                print(row(name, r, None if r is base else base))
            hw = broker.fetch("bench", 0, 0, max_records=1)["high_watermark"]
            print(f"\nbroker log end offset after the run: {hw:,} records, {acknowledged:,} acked")
            if hw != acknowledged:
                raise SystemExit(f"the log holds {hw:,} records, {acknowledged:,} were acked")
        finally:
            baseline.terminate()
            broker.stop()
            pg.stop()


if __name__ == "__main__":
    main()
