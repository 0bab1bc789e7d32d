"""The brokers' links to each other, in process: a follower's replica fetches and a broker's
forwarded requests are routed to the other broker's ASGI application, unless the test has
cut the link.

A cut link is a network that drops packets: new requests time out at once (a connect
timeout) and the answers of those in flight are lost (a read timeout). The follower sees
errors, never a hang, and nothing the leader answered after the cut arrives. A crashed
broker (`crash`) is one whose process is gone: its port refuses connections and those in
flight are reset, which is what tells its peers it died (ingest/replication/death_signal.py)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx
from starlette.types import ASGIApp

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
        self.crashed: set[int] = set()  # brokers whose process is gone: no traffic either way
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

    def cut_one_way(self, src: int, dst: int) -> None:
        """Requests from `src` to `dst` fail (a firewall dropping one direction's new
        connections); `dst` still reaches `src`."""
        self._cut.add((src, dst))
        for task in self._inflight.pop((src, dst), set()):
            task.cancel()

    def crash(self, broker_id: int) -> None:
        """The broker's process is gone: connections to it are refused, those in flight reset."""
        self.crashed.add(broker_id)
        self.apps.pop(broker_id, None)
        for (_, dst), tasks in list(self._inflight.items()):
            if dst == broker_id:
                for task in tasks:
                    task.cancel()

    def restore(self, a: int, b: int) -> None:
        self._cut -= {(a, b), (b, a)}

    def is_cut(self, src: int, dst: int) -> bool:
        return (src, dst) in self._cut

    def link_of(self, src: int) -> Callable[[], httpx.AsyncBaseTransport]:
        """Broker `src`'s link to its peers (ingest/broker_deps.py BrokerDeps.peer_link)."""
        return lambda: LinkTransport(self, src)


class LinkTransport(httpx.AsyncBaseTransport):
    def __init__(self, links: Links, src: int) -> None:
        self.links, self.src = links, src

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        dst = broker_of(request.url)
        app = self.links.apps.get(dst)
        if self.src in self.links.crashed:
            raise httpx.ConnectError(f"broker {self.src} is gone", request=request)
        if self.links.is_cut(self.src, dst):
            raise httpx.ConnectTimeout(f"link {self.src} -> {dst} is cut", request=request)
        if app is None:
            raise httpx.ConnectError(f"broker {dst} refuses connections", request=request)
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
        if self.links.is_cut(self.src, dst):
            raise httpx.ReadTimeout(f"link {self.src} -> {dst} was cut", request=request)
        if task.cancelled() or dst not in self.links.apps:
            raise httpx.ReadError(f"broker {dst}'s connection was reset", request=request)
        response = task.result()
        self.links.completed[key] = self.links.completed.get(key, 0) + 1
        return response


async def _read(transport: httpx.ASGITransport, request: httpx.Request) -> httpx.Response:
    response = await transport.handle_async_request(request)
    body = await response.aread()
    return httpx.Response(response.status_code, headers=response.headers, content=body)
