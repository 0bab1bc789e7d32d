"""The brokers' links to each other, in process: a follower's replica fetches and a broker's
forwarded requests are routed to the other broker's ASGI application, unless the test has
cut the link.

A cut link fails new requests at once (a refused connection) and loses the answers of those
in flight (a reset connection): the follower sees errors, never a hang, and nothing the
leader answered after the cut arrives."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx
from starlette.types import ASGIApp

from cluster.internal_http import ClusterToken

# The broker a task works for: its log records are attributed to it (cluster.py).
CURRENT_BROKER: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "harness_broker", default=None
)


def host_of(broker_id: int) -> str:
    return f"broker-{broker_id}.harness"


def broker_of(url: httpx.URL | str) -> int:
    host = urlsplit(str(url)).hostname or ""
    if not host.startswith("broker-") or not host.endswith(".harness"):
        raise httpx.ConnectError(f"no in-process broker at {url}")
    return int(host[len("broker-") : -len(".harness")])


class Links:
    """Which broker-to-broker links are up, and where each broker's application is."""

    def __init__(self) -> None:
        self.apps: dict[int, ASGIApp] = {}
        self._cut: set[tuple[int, int]] = set()  # (from, to), one way each
        self.completed: dict[tuple[int, int], int] = {}  # answers delivered, per link
        self._inflight: dict[tuple[int, int], set[asyncio.Task[httpx.Response]]] = {}

    def cut(self, a: int, b: int) -> None:
        """Cut both directions between brokers a and b. On the loop: requests in flight are
        cancelled at once (a reset connection), before anything else runs there, so a long
        poll waiting on the leader is never answered after the cut."""
        self._cut |= {(a, b), (b, a)}
        for link in ((a, b), (b, a)):
            for task in self._inflight.pop(link, set()):
                task.cancel()

    def restore(self, a: int, b: int) -> None:
        self._cut -= {(a, b), (b, a)}

    def is_cut(self, src: int, dst: int) -> bool:
        return (src, dst) in self._cut

    def client_factory(
        self, src: int
    ) -> Callable[[Callable[[], str], httpx.Timeout], httpx.AsyncClient]:
        """Broker `src`'s link to its peers (ingest/broker_deps.py BrokerDeps.peer_link)."""

        def make(token: Callable[[], str], timeout: httpx.Timeout) -> httpx.AsyncClient:
            return httpx.AsyncClient(
                auth=ClusterToken(token), timeout=timeout, transport=LinkTransport(self, src)
            )

        return make


class LinkTransport(httpx.AsyncBaseTransport):
    def __init__(self, links: Links, src: int) -> None:
        self.links, self.src = links, src

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        dst = broker_of(request.url)
        app = self.links.apps.get(dst)
        if app is None or self.links.is_cut(self.src, dst):
            raise httpx.ConnectError(f"link {self.src} -> {dst} is cut", request=request)
        # Served as the target broker's work (its logs), on the same loop.
        ctx = contextvars.copy_context()
        ctx.run(CURRENT_BROKER.set, dst)
        transport = httpx.ASGITransport(app)
        task = asyncio.get_running_loop().create_task(_read(transport, request), context=ctx)
        key = (self.src, dst)
        inflight = self.links._inflight.setdefault(key, set())
        inflight.add(task)
        try:
            await asyncio.wait([task])
        finally:
            inflight.discard(task)
        if task.cancelled() or self.links.is_cut(self.src, dst) or dst not in self.links.apps:
            raise httpx.ReadError(f"link {self.src} -> {dst} was cut", request=request)
        response = task.result()
        self.links.completed[key] = self.links.completed.get(key, 0) + 1
        return response


async def _read(transport: httpx.ASGITransport, request: httpx.Request) -> httpx.Response:
    response = await transport.handle_async_request(request)
    body = await response.aread()
    return httpx.Response(response.status_code, headers=response.headers, content=body)
