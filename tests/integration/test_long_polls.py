"""Waking many long polls (issue 13, found #7): one produce wakes hundreds of fetches waiting
on a partition. Every poll gets the record, polls asking for other things get their own
answers, and the broker stays responsive. Timing lives in bench/long_polls.py, whose smoke
mode runs here too."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from bench.long_polls import _poll, wake_round
from bench.servers import SHARED_POSTGRES
from tests.integration.brokers import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]


def test_one_produce_answers_every_waiting_poll(broker: BrokerProcess) -> None:
    broker.create_topic("polled")
    broker.produce("polled", [{"value": "before"}])
    got = asyncio.run(wake_round(broker.url, broker.port, "polled", 300, "woken"))
    assert [a for a in got.answers if a != (200, ["woken"])] == []
    # Again, with polls that differ: a shared read must not answer a poll it does not fit.

    async def mixed() -> list[tuple[int, list[str]]]:
        waiting = [
            asyncio.ensure_future(_poll(broker.port, "polled", 2, 10_000)) for _ in range(50)
        ]
        one = [
            asyncio.ensure_future(_poll(broker.port, "polled", 2, 10_000, "&max_records=1"))
            for _ in range(5)
        ]
        await asyncio.sleep(1.0)
        await asyncio.to_thread(broker.produce, "polled", [{"value": "a"}, {"value": "b"}])
        return list(await asyncio.gather(*waiting, *one))

    answers = asyncio.run(mixed())
    assert answers[:50] == [(200, ["a", "b"])] * 50
    assert answers[50:] == [(200, ["a"])] * 5
    assert broker.http.get("/readyz").status_code == 200


def test_long_poll_bench_smoke(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.long_polls", "--smoke"],
        cwd=ROOT,
        env={**os.environ, SHARED_POSTGRES: database_url},  # a database, not a server
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not a private one" in done.stdout, done.stdout  # bench/servers.py's line
    assert "baseline: produce with no poll waiting" in done.stdout, done.stdout
    assert "all 200 polls answered" in done.stdout and "(200 with the record)" in done.stdout
