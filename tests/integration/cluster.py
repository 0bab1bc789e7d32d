"""Several real broker processes on one Postgres: the harness for replication tests."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.integration.brokers import BrokerProcess

T = TypeVar("T")

# Short timings so failover tests run in seconds (production defaults are longer), with
# room for a loaded CI machine (two test workers on two cores): a 1.5 s lease lapsed there.
FAST = [
    "--lease-ms",
    "3000",
    "--heartbeat-ms",
    "250",
    "--replica-lag-ms",
    "4000",
    "--request-timeout-ms",
    "10000",
]


def wait_for(
    what: str, check: Callable[[], T | None], timeout: float = 30, every: float = 0.1
) -> T:
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except (httpx.HTTPError, KeyError, AssertionError) as exc:
            last_error = exc
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what} (last error: {last_error})")


class Cluster:
    def __init__(self, database_url: str, root: Path, size: int, extra: list[str] | None = None):
        self.brokers = {
            i: BrokerProcess(database_url, root / f"data-{i}", i, [*FAST, *(extra or [])])
            for i in range(1, size + 1)
        }

    def start(self) -> Cluster:
        for b in self.brokers.values():
            b.start(wait=False)
        for b in self.brokers.values():
            b.wait_ready()
        try:
            wait_for(
                "all brokers alive",
                lambda: (
                    all(x["alive"] for x in self.any().http.get("/brokers").json()["brokers"])
                    and len(self.any().http.get("/brokers").json()["brokers"]) == len(self.brokers)
                ),
            )
        except AssertionError as exc:
            seen = self.any().http.get("/brokers").text
            logs = "\n".join(f"--- broker {i}:\n{b.log_tail(15)}" for i, b in self.brokers.items())
            raise AssertionError(f"{exc}\n/brokers: {seen}\n{logs}") from None
        return self

    def stop(self) -> None:
        for b in self.brokers.values():
            if b.proc is not None and b.proc.poll() is None:
                if b.paused:
                    b.kill(signal.SIGCONT)
                b.stop()

    def alive(self) -> list[BrokerProcess]:
        return [
            b
            for b in self.brokers.values()
            if b.proc is not None and b.proc.poll() is None and not b.paused
        ]

    def any(self, exclude: int | None = None) -> BrokerProcess:
        return next(b for b in self.alive() if b.broker_id != exclude)

    def describe(self, topic: str, via: BrokerProcess | None = None) -> dict[str, Any]:
        r = (via or self.any()).http.get(f"/topics/{topic}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    def partition(self, topic: str, p: int = 0) -> dict[str, Any]:
        return dict(self.describe(topic)["partitions"][p])

    def leader(self, topic: str, p: int = 0) -> BrokerProcess:
        leader = wait_for("a leader", lambda: self.partition(topic, p)["leader"])
        return self.brokers[leader]

    def controller(self) -> int:
        return next(
            b["id"] for b in self.any().http.get("/brokers").json()["brokers"] if b["controller"]
        )

    def segment_bytes(self, broker: BrokerProcess, topic: str, p: int = 0) -> bytes:
        d = broker.data_dir / f"{topic}-{p}"
        return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))
