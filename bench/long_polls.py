"""Waking many long polls: N fetches wait on one partition, then one record is produced.

    .venv/bin/python -m bench.long_polls [--polls 1000] [--rounds 3]
    .venv/bin/python -m bench.long_polls --smoke     # 200 polls, 1 round (the test suite)

Starts its own Postgres and one broker on loopback. Prints, per round, the produce's latency
and the time until every poll has its answer, next to the baseline measured in the same run:
the same produce with no poll waiting. Polls are raw HTTP/1.1 on asyncio streams, so the
client costs little next to the broker.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import httpx
import orjson

from bench.servers import bench_postgres
from tests.integration.brokers import BrokerProcess


class Round(NamedTuple):
    produce_ms: float  # the produce request that woke the polls
    all_answered_ms: float  # from the produce until the last poll's answer
    answers: list[tuple[int, list[str]]]  # per poll: HTTP status, record values


async def _poll(
    port: int, topic: str, offset: int, wait_ms: int, query: str = ""
) -> tuple[int, list[str]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        path = f"/topics/{topic}/partitions/0/records?offset={offset}&wait_ms={wait_ms}{query}"
        writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode())
        raw = await reader.read()
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    values = [str(r["value"]) for r in orjson.loads(body)["records"]] if status == 200 else []
    return status, values


async def _waiting(http: httpx.AsyncClient) -> int:
    text = (await http.get("/metrics")).text
    for line in text.splitlines():
        if line.startswith("tierlog_long_polls_in_flight "):
            return int(float(line.split()[1]))
    return 0


async def wake_round(url: str, port: int, topic: str, polls: int, value: str) -> Round:
    """Open `polls` long polls at the log end, wait until all wait, produce one record."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        r = await http.get(f"/topics/{topic}/partitions/0/offsets", params={"at": "latest"})
        offset = int(r.json()["offset"])
        tasks = [asyncio.ensure_future(_poll(port, topic, offset, 30_000)) for _ in range(polls)]
        deadline = time.monotonic() + 30
        while await _waiting(http) < polls:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {await _waiting(http)} of {polls} polls are waiting")
            await asyncio.sleep(0.05)
        start = time.perf_counter()
        r = await http.post(
            f"/topics/{topic}/records", params={"acks": "1"}, json={"records": [{"value": value}]}
        )
        produce_ms = (time.perf_counter() - start) * 1000
        r.raise_for_status()
        answers = await asyncio.gather(*tasks)
        return Round(produce_ms, (time.perf_counter() - start) * 1000, list(answers))


async def _baseline(url: str, topic: str, times: int) -> float:
    """Median produce latency with nobody waiting."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        took = []
        for i in range(times):
            start = time.perf_counter()
            r = await http.post(f"/topics/{topic}/records", json={"records": [{"value": f"b{i}"}]})
            r.raise_for_status()
            took.append((time.perf_counter() - start) * 1000)
    return sorted(took)[len(took) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--polls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="200 polls, one round")
    args = parser.parse_args()
    polls, rounds = (200, 1) if args.smoke else (args.polls, args.rounds)
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        os.chmod(tmp, 0o755)
        pg = bench_postgres(Path(tmp) / "pg", fast=False)
        db = pg.start()
        # Every poll comes from 127.0.0.1: lift the per-address cap (512) above the poll count.
        per_address = polls + 64
        broker = BrokerProcess(
            db, Path(tmp) / "broker", extra_args=["--max-connections-per-address", str(per_address)]
        ).start()
        try:
            broker.create_topic("polled")
            base = asyncio.run(_baseline(broker.url, "polled", 20))
            print(
                f"long-poll wake-up: 1 broker, {polls} polls, {os.cpu_count()} cores shared, "
                f"--max-connections-per-address {per_address}"
            )
            print(f"baseline: produce with no poll waiting  {base:8.1f} ms (median of 20)")
            for i in range(rounds):
                got = asyncio.run(wake_round(broker.url, broker.port, "polled", polls, f"w{i}"))
                served = sum(1 for status, values in got.answers if values == [f"w{i}"])
                print(
                    f"round {i}: produce {got.produce_ms:8.1f} ms, all {polls} polls answered "
                    f"in {got.all_answered_ms:8.1f} ms ({served} with the record)"
                )
                if served != polls:
                    raise SystemExit(f"only {served} of {polls} polls got the record")
        finally:
            broker.stop()
            pg.stop()


if __name__ == "__main__":
    main()
