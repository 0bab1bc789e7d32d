"""One in-process broker of the harness: its Broker, its ASGI application, the proxy its
Postgres connections go through (so the test can cut them) and a client the test talks to it
with (never cut: the test reaches every broker, as in the process tests)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import httpx
from prometheus_client import CollectorRegistry
from sqlalchemy.engine import make_url

from cluster.authorizer import AuthSettings
from cluster.clock import Clock
from ingest.api.app import build_app
from ingest.broker import Broker
from ingest.broker_config import BrokerConfig
from ingest.broker_deps import BrokerDeps
from ingest.service.services import Services
from metadata.db import make_engine
from tests.harness.links import CURRENT_BROKER, Links, host_of
from tests.harness.loop import LoopThread
from tests.integration.tcp_proxy import TcpProxy

T = TypeVar("T")

# Leases and the replica lag on the manual clock: nothing lapses unless the test advances
# time (a cut broker's database lease is pinned and lapses on that clock: cut_leases.py).
LEASE_MS = 8_000
REPLICA_LAG_MS = 4_000
KAFKA_PORT_BASE = 19_000  # broker i registers 127.0.0.1:19000+i as its Kafka address
TIMINGS: dict[str, Any] = {
    "lease_ms": LEASE_MS,
    "replica_lag_ms": REPLICA_LAG_MS,
    "heartbeat_ms": 100,
    "controller_tick_ms": 100,
    "metadata_refresh_ms": 500,
    "request_timeout_ms": 10_000,
}


class Node:
    def __init__(
        self,
        broker_id: int,
        database_url: str,
        data_dir: Path,
        clock: Clock,
        links: Links,
        loop: LoopThread,
    ) -> None:
        self.broker_id, self.data_dir, self.loop = broker_id, data_dir, loop
        url = make_url(database_url)
        self.to_postgres = TcpProxy(int(url.port or 5432))
        self.database_url = url.set(host="127.0.0.1", port=self.to_postgres.port).render_as_string(
            hide_password=False
        )
        self.config = BrokerConfig(
            broker_id=broker_id,
            host="127.0.0.1",
            port=80,
            advertised_url=f"http://{host_of(broker_id)}",
            # Registered as a Kafka listener's address, as real brokers do; the harness
            # serves no Kafka protocol (ingest/server.py starts listeners, not the Broker).
            kafka_listen=("127.0.0.1", KAFKA_PORT_BASE + broker_id),
            data_dir=data_dir,
            database_url=self.database_url,
            auth=AuthSettings(enabled=False),
            **TIMINGS,
        )
        self.registry = CollectorRegistry()  # this broker's metrics, apart from the others'
        self._clock, self._links = clock, links
        self.broker: Broker | None = None
        self.running = False
        self.http = NodeHttp(self)

    def start(self) -> None:
        self.registry = CollectorRegistry()  # a restarted broker registers its metrics anew
        deps = BrokerDeps(
            make_engine(self.database_url),
            clock=self._clock,
            registry=self.registry,
            peer_link=self._links.link_of(self.broker_id),
        )
        self.broker = Broker(self.config, deps)
        self.app = build_app(Services.of(self.broker))
        self.run(self.broker.start())
        self._links.apps[self.broker_id] = self.app
        self.http.connect(self.app)
        self.running = True

    def stop(self) -> None:
        if not self.running or self.broker is None:
            return
        self.running = False
        self._links.apps.pop(self.broker_id, None)
        self.run(self.broker.stop())
        self.run(self.http.close())

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run `coro` on the harness loop as this broker's work (its tasks and log records)."""

        async def as_me() -> T:
            CURRENT_BROKER.set(self.broker_id)
            return await coro

        return self.loop.run(as_me(), timeout)

    @property
    def b(self) -> Broker:
        assert self.broker is not None, f"broker {self.broker_id} was never started"
        return self.broker

    def segment_bytes(self, topic: str, p: int = 0) -> bytes:
        d = self.data_dir / f"{topic}-{p}"
        return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))

    def fetch_all(self, topic: str, partition: int = 0) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        offset = 0
        while True:
            r = self.http.get(
                f"/topics/{topic}/partitions/{partition}/records",
                params={"offset": offset, "max_records": 10_000},
            )
            assert r.status_code == 200, r.text
            doc = r.json()
            out.extend(doc["records"])
            if doc["next_offset"] >= doc["high_watermark"] or doc["next_offset"] <= offset:
                return out
            offset = doc["next_offset"]

    def close(self) -> None:
        self.stop()
        self.to_postgres.close()


class NodeHttp:
    """A synchronous client of one in-process broker's HTTP API."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self._client: httpx.AsyncClient | None = None

    def connect(self, app: Any) -> None:
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app),
            base_url=f"http://{host_of(self._node.broker_id)}",
            timeout=30,
        )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        assert self._client is not None, f"broker {self._node.broker_id} is not running"
        return self._node.run(self._client.request(method, url, **kw))

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("POST", url, **kw)

    def patch(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("PATCH", url, **kw)


class BrokerLogs(logging.Handler):
    """Every tierlog log record, with the broker whose work wrote it."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[tuple[int | None, logging.LogRecord]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((CURRENT_BROKER.get(), record))

    def text(self, broker_id: int) -> str:
        return "\n".join(r.getMessage() for b, r in list(self.records) if b == broker_id)


async def until(what: str, check: Any, timeout: float = 5.0) -> bool:
    """Poll `check()` on the loop until true (False after `timeout`: the caller decides)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True
