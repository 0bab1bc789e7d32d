"""Several real broker processes on one Postgres: the harness for replication tests."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.integration.brokers import READY_TIMEOUT_S, BrokerProcess
from tests.integration.ports import free_port

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
    def __init__(
        self,
        database_url: str,
        root: Path,
        size: int,
        extra: list[str] | None = None,
        env: dict[str, str] | None = None,
        kafka: bool = False,
    ):
        """`kafka`: each broker also listens for Kafka clients, on a port of its own (brokers
        learn each other's Kafka addresses from their registrations)."""
        self.brokers: dict[int, BrokerProcess] = {}
        self.kafka_ports: dict[int, int] = {}
        for i in range(1, size + 1):
            args = [*FAST, *(extra or [])]
            if kafka:
                self.kafka_ports[i] = free_port()
                args += ["--kafka-listen", f"127.0.0.1:{self.kafka_ports[i]}"]
            self.brokers[i] = BrokerProcess(database_url, root / f"data-{i}", i, args, env=env)
        self._producer = IdempotentProducer(self)

    def produce(
        self, topic: str, records: list[dict[str, Any]], partition: int = 0, **kw: Any
    ) -> list[dict[str, int]]:
        """Append `records` to one partition exactly once, through leader changes (see
        IdempotentProducer): for tests that need data in place, not a produce outcome."""
        return self._producer.send(topic, records, partition, **kw)

    def start(self, ready_timeout: float = READY_TIMEOUT_S) -> Cluster:
        for b in self.brokers.values():
            b.start(wait=False)
        for b in self.brokers.values():
            b.wait_ready(ready_timeout)
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
        # All at once, then wait for each: each broker's shutdown is independent of the
        # others' (no controlled hand-off), and in turn they cost a module seconds each.
        running = [b for b in self.brokers.values() if b.proc is not None and b.proc.poll() is None]
        for b in running:
            b.begin_stop()
        for b in running:
            b.wait_exit()

    def bootstrap(self, exclude: int | None = None) -> str:
        """Kafka bootstrap servers: the brokers' Kafka addresses (Cluster(kafka=True))."""
        assert self.kafka_ports, "a cluster started without Kafka listeners"
        return ",".join(f"127.0.0.1:{p}" for i, p in self.kafka_ports.items() if i != exclude)

    def alive(self) -> list[BrokerProcess]:
        return [
            b
            for b in self.brokers.values()
            if b.proc is not None and b.proc.poll() is None and not b.paused
        ]

    def any(self, exclude: int | None = None) -> BrokerProcess:
        return next(b for b in self.alive() if b.broker_id != exclude)

    def create_topic(
        self, name: str, partitions: int = 1, rf: int = 3, **configs: object
    ) -> dict[str, Any]:
        """Create `name` (configs as keyword arguments, `min_insync_replicas=2` for
        min.insync.replicas) and wait until every partition's ISR is whole: then every
        replica hosts it and it is writable. Returns the creation's answer (its id)."""
        r = self.any().http.post(
            "/topics",
            json={
                "name": name,
                "partitions": partitions,
                "replication_factor": rf,
                "configs": {k.replace("_", "."): v for k, v in configs.items()},
            },
        )
        assert r.status_code == 201, r.text
        wait_for(
            f"{name}'s replicas ready",
            lambda: all(len(p["isr"]) == rf for p in self.describe(name)["partitions"]),
        )
        return dict(r.json())

    def describe(self, topic: str, via: BrokerProcess | None = None) -> dict[str, Any]:
        r = (via or self.any()).http.get(f"/topics/{topic}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    def partition(self, topic: str, p: int = 0) -> dict[str, Any]:
        return dict(self.describe(topic)["partitions"][p])

    def leader(self, topic: str, p: int = 0) -> BrokerProcess:
        leader = wait_for("a leader", lambda: self.partition(topic, p)["leader"])
        return self.brokers[leader]

    def controller(self) -> int | None:
        """The controller lease's holder as /brokers reports it; None between holders."""
        brokers = self.any().http.get("/brokers").json()["brokers"]
        return next((b["id"] for b in brokers if b["controller"]), None)

    def segment_bytes(self, broker: BrokerProcess, topic: str, p: int = 0) -> bytes:
        d = broker.data_dir / f"{topic}-{p}"
        return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


# Errors after which the same batch may be sent again (Kafka's retriable produce errors).
_RETRIABLE = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "LEADER_NOT_AVAILABLE",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
        "KAFKA_STORAGE_ERROR",
    }
)


class IdempotentProducer:
    """Produce as an idempotent producer (POST /producers, then a sequence per partition), so a
    batch whose outcome was unknown can be sent again without duplicating: the leader answers
    a retried batch with its original offsets. Under a loaded CI machine a lease can lapse and
    leadership move mid-test; a plain retry would then write some records twice."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.producer_id: int | None = None
        self.sequences: dict[tuple[str, int], int] = defaultdict(int)

    def send(
        self,
        topic: str,
        records: list[dict[str, Any]],
        partition: int = 0,
        via: int | None = None,
        timeout: float = 60,
    ) -> list[dict[str, int]]:
        if self.producer_id is None:
            r = self.cluster.any().http.post("/producers")
            assert r.status_code == 201, r.text
            self.producer_id = int(r.json()["producer_id"])
        sequence = self.sequences[(topic, partition)]
        headers = {
            "X-Tierlog-Producer-Id": str(self.producer_id),
            "X-Tierlog-Producer-Epoch": "0",
            "X-Tierlog-Sequence": str(sequence),
        }
        body = {"records": [{**rec, "partition": partition} for rec in records]}
        deadline = time.monotonic() + timeout
        while True:
            broker = self.cluster.brokers[via] if via else self._route(topic, partition)
            try:
                r = broker.http.post(
                    f"/topics/{topic}/records", params={"acks": "all"}, json=body, headers=headers
                )
            except httpx.HTTPError as exc:
                last = repr(exc)
            else:
                if r.status_code == 200:
                    self.sequences[(topic, partition)] = sequence + len(records)
                    return list(r.json()["offsets"])
                assert r.json().get("error_code") in _RETRIABLE, r.text
                last = r.text
            if time.monotonic() > deadline:
                raise AssertionError(f"produce to {topic}-{partition} kept failing: {last}")
            time.sleep(0.2)

    def _route(self, topic: str, partition: int) -> BrokerProcess:
        """The leader, or any running broker (which forwards) if the leader is paused or down."""
        leader = self.cluster.leader(topic, partition)
        return leader if leader in self.cluster.alive() else self.cluster.any()
