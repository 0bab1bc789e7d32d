"""HTTP plumbing: which node to call, and Kafka-named errors out of HTTP answers.

Bootstrap URLs are the way in; partition leaders' URLs are learnt from metadata. A URL that
refused a connection is set aside for a short while, so requests fall back to another node
(any node answers any request, forwarding to the leader: docs/design.md §5).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
import orjson

from http_transport.aiohttp_transport import AiohttpTransport
from tierlog.client.errors import ApiError, ClientTimeoutError, NetworkError, error_from_response

ARROW_STREAM = "application/vnd.apache.arrow.stream"
USER_AGENT = "tierlog-python-client/0.1"
DOWN_SECONDS = 2.0  # how long a URL that refused a connection is avoided


def normalize_url(url: str) -> str:
    url = url.strip().rstrip("/")
    return url if "://" in url else f"http://{url}"


def bootstrap_urls(bootstrap: str | Sequence[str]) -> list[str]:
    """Accepts "http://a:8080", "a:8080,b:8080" or a list of either."""
    items = [bootstrap] if isinstance(bootstrap, str) else list(bootstrap)
    urls = [normalize_url(u) for item in items for u in item.split(",") if u.strip()]
    if not urls:
        raise ValueError("at least one bootstrap URL is needed")
    return urls


class Endpoints:
    """The bootstrap URLs, and the URLs (any node's) that recently refused connections."""

    def __init__(self, bootstrap: str | Sequence[str]) -> None:
        self.bootstrap = bootstrap_urls(bootstrap)
        self._next = 0
        self._down: dict[str, float] = {}
        self._lock = threading.Lock()

    def usable(self, url: str) -> bool:
        until = self._down.get(url)
        return until is None or until <= time.monotonic()

    def mark_down(self, url: str, seconds: float = DOWN_SECONDS) -> None:
        with self._lock:
            self._down[url] = time.monotonic() + seconds

    def mark_up(self, url: str) -> None:
        self._down.pop(url, None)

    def pick(self) -> str:
        """A bootstrap URL, preferring ones not set aside (the last good one first)."""
        with self._lock:
            n = len(self.bootstrap)
            for i in range(n):
                url = self.bootstrap[(self._next + i) % n]
                if self.usable(url):
                    self._next = (self._next + i) % n
                    return url
            self._next = (self._next + 1) % n
            return self.bootstrap[self._next]


def base_of(url: str) -> str:
    u = httpx.URL(url)
    return f"{u.scheme}://{u.netloc.decode()}"


class AsyncHttp:
    """An httpx.AsyncClient that raises ApiError / NetworkError and fails over between nodes."""

    def __init__(
        self,
        endpoints: Endpoints,
        *,
        timeout_s: float,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 100,
        api_key: str | None = None,
        verify: bool | str = True,
    ) -> None:
        """`api_key`: sent as `Authorization: Bearer` (default: $TIERLOG_API_KEY; none if
        unset). `verify`: TLS verification, or the path of a CA bundle (self-signed nodes)."""
        self.endpoints = endpoints
        self.timeout_s = timeout_s
        headers = {"user-agent": USER_AGENT}
        key = api_key if api_key is not None else os.environ.get("TIERLOG_API_KEY")
        if key:
            headers["authorization"] = f"Bearer {key}"
        if transport is None:  # aiohttp carries the bytes: ~20% less CPU per record sent
            transport = AiohttpTransport(verify, max_connections, trust_env=True)
        self.client = httpx.AsyncClient(timeout=timeout_s, transport=transport, headers=headers)

    async def request(
        self,
        method: str,
        url: str,
        *,
        body: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> httpx.Response:
        """One request; raises NetworkError when no answer came (the answer may be an error)."""
        hdrs = dict(headers or {})
        if body is not None:
            content = orjson.dumps(body)
            hdrs["content-type"] = "application/json"
        try:
            response = await self.client.request(
                method,
                url,
                content=content,
                headers=hdrs,
                params={k: v for k, v in (params or {}).items() if v is not None},
                timeout=timeout_s if timeout_s is not None else self.timeout_s,
            )
        except httpx.TransportError as exc:
            err = NetworkError(url, exc)
            if err.connect_failed:
                self.endpoints.mark_down(base_of(url))
            raise err from exc
        return response

    async def call(self, method: str, url: str, **kw: Any) -> Any:
        """A request whose answer is JSON: the parsed document, or the ApiError raised."""
        response = await self.request(method, url, **kw)
        if response.status_code >= 400:
            raise error_from_response(response)
        return orjson.loads(response.content) if response.content else None

    async def call_any(
        self,
        method: str,
        path: str,
        *,
        deadline: float,
        backoff_s: float = 0.1,
        retry: bool = True,
        idempotent: bool | None = None,
        **kw: Any,
    ) -> Any:
        """`call` on a bootstrap node, retrying retriable errors (other nodes first) until
        `deadline` (time.monotonic()). Non-retriable errors are raised at once, and so is a
        lost answer to a request that is not safe to repeat (only GETs are, unless told)."""
        safe = method == "GET" if idempotent is None else idempotent
        delay = backoff_s
        while True:
            url = self.endpoints.pick()
            try:
                return await self.call(method, url + path, **kw)
            except ApiError as exc:
                if not (retry and exc.retriable):
                    raise
                lost = isinstance(exc, NetworkError) and not exc.connect_failed
                if lost and not safe:
                    raise
                if isinstance(exc, NetworkError):
                    self.endpoints.mark_down(url)
                wait = max(delay, exc.retry_after_s)  # the server's Retry-After (429/503)
                if time.monotonic() + wait >= deadline:
                    raise
            await asyncio.sleep(wait)
            delay = min(delay * 2, 1.0)

    async def aclose(self) -> None:
        await self.client.aclose()


def remaining(deadline: float, what: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise ClientTimeoutError(f"{what} timed out")
    return left
