"""Idempotent retries against a real broker: answers lost after the broker wrote the batch
(dropped connections, answers held past the client's timeout) never create duplicates."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port
from tierlog import Producer

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class LossyProxy:
    """A tiny HTTP/1.1 proxy in front of a broker. Every request is forwarded and answered by
    the broker; for produce requests, `fate(n)` (n counts them) may then "drop" the answer
    (close the connection instead) or "hold" it until the client gives up waiting."""

    def __init__(self, target: str, fate: Callable[[int], str]) -> None:
        self.target = target
        self.fate = fate
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.counts = {"forwarded": 0, "drop": 0, "hold": 0}
        self._produce = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> LossyProxy:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._client = httpx.AsyncClient(base_url=self.target, timeout=60)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.port)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = dict(line.split(": ", 1) for line in lines[1:] if line)
                lower = {k.lower(): v for k, v in headers.items()}
                body = await reader.readexactly(int(lower.get("content-length", "0")))
                forward = {k: v for k, v in headers.items() if k.lower() not in _HOP_HEADERS}
                response = await self._client.request(method, target, content=body, headers=forward)
                self.counts["forwarded"] += 1
                fate = "pass"
                if method == "POST" and target.split("?")[0].endswith("/records"):
                    self._produce += 1
                    fate = self.fate(self._produce)
                if fate == "drop":
                    self.counts["drop"] += 1
                    return  # the broker wrote it; the client never hears
                if fate == "hold":
                    self.counts["hold"] += 1
                    await reader.read()  # until the client times out and hangs up
                    return
                out = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
                out += [
                    f"{k}: {v}"
                    for k, v in response.headers.items()
                    if k.lower() not in _HOP_HEADERS
                ]
                out.append(f"content-length: {len(response.content)}")
                writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + response.content)
                await writer.drain()
        finally:
            writer.close()


@pytest.fixture
def proxied(
    broker_factory: Callable[..., BrokerProcess],
) -> Iterator[tuple[BrokerProcess, LossyProxy]]:
    b = broker_factory(start=False)

    def fate(n: int) -> str:
        return "drop" if n % 3 == 0 else "hold" if n % 7 == 0 else "pass"

    proxy = LossyProxy(b.url, fate).start()
    # Clients learn the broker's URL from /brokers and X-Tierlog-Leader: make it the proxy's.
    b.extra_args += ["--advertised-url", proxy.url]
    b.start()
    yield b, proxy
    proxy.stop()


def check_exactly_once(
    broker: BrokerProcess, topic: str, partitions: int, futures: list[Any]
) -> None:
    sent: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for future, value in futures:
        md = future.result(0)
        sent[md.partition].append(value)
    for p in range(partitions):
        stored = [r["value"].encode() for r in broker.fetch_all(topic, p, value_format="string")]
        assert stored == [v for v in sent[p]]  # each once, in send order


def test_lost_and_late_answers_leave_no_duplicates(
    proxied: tuple[BrokerProcess, LossyProxy],
) -> None:
    broker, proxy = proxied
    broker.create_topic("idem", partitions=2)
    futures = []
    with Producer(
        proxy.url, request_timeout_ms=1000, linger_ms=5, batch_size=400, retry_backoff_ms=20
    ) as producer:
        for i in range(300):
            value = b"value-%d" % i
            futures.append((producer.send("idem", value, key=b"k%d" % (i % 5)), value))
        producer.flush(120)
    assert proxy.counts["drop"] > 0 and proxy.counts["hold"] > 0
    check_exactly_once(broker, "idem", 2, futures)


class LosingTransport(httpx.AsyncBaseTransport):
    """Sends every request, then, for every other produce request, reads the broker's answer
    and throws it away, raising ReadTimeout as if it never came."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.produced = 0
        self.lost = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.endswith("/records"):
            self.produced += 1
            if self.produced % 2:
                await response.aread()
                await response.aclose()
                self.lost += 1
                raise httpx.ReadTimeout("answer thrown away", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_timeouts_after_the_write_are_retried_without_duplicates(broker: BrokerProcess) -> None:
    broker.create_topic("idem2", partitions=3)
    transport = LosingTransport()
    futures = []
    with Producer(broker.url, transport=transport, linger_ms=2, batch_size=300) as producer:
        for i in range(200):
            value = b"v%d" % i
            futures.append((producer.send("idem2", value), value))
        producer.flush(60)
    assert transport.lost > 10
    check_exactly_once(broker, "idem2", 3, futures)
    # Retried batches were answered with their original offsets.
    for future, value in futures:
        md = future.result()
        doc = broker.fetch("idem2", md.partition, md.offset, max_records=1, value_format="string")
        assert doc["records"][0]["value"].encode() == value
