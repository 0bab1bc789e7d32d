"""The console's client of the cluster's public HTTP API (httpx). Every call carries the
signed-in user's API key; every failure becomes a ConsoleApiError with a Kafka-style error
name and a readable message, so a page can show it instead of a trace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from http_transport.trust import trust

# Errors of our own, when the API gave no answer to name one.
NETWORK_EXCEPTION = "NETWORK_EXCEPTION"
REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"


class ConsoleApiError(Exception):
    """An API call that failed: `name` is the API's error code (TOPIC_ALREADY_EXISTS, ...)."""

    def __init__(self, name: str, message: str, status: int = 502) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message
        self.status = status

    @property
    def needs_login(self) -> bool:
        return self.status == 401


def _error_of(response: httpx.Response) -> ConsoleApiError:
    try:
        doc = response.json()
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error_code"), str):
        return ConsoleApiError(doc["error_code"], str(doc.get("message", "")), response.status_code)
    text = response.text.strip()[:200] or response.reason_phrase
    if response.status_code in _BODYLESS:  # a HEAD's refusal has no body to name it
        return ConsoleApiError(_BODYLESS[response.status_code], text, response.status_code)
    return ConsoleApiError(UNKNOWN_SERVER_ERROR, f"HTTP {response.status_code}: {text}", 502)


_BODYLESS = {401: "SASL_AUTHENTICATION_FAILED", 403: "CLUSTER_AUTHORIZATION_FAILED"}


KEEPALIVE_S = 2.0
IDEMPOTENT = frozenset({"GET", "HEAD"})


class ClusterApi:
    """One shared connection pool to a broker (or any node) URL."""

    def __init__(self, base_url: str, verify: str | bool = True, timeout_s: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            verify=trust(verify),
            timeout=httpx.Timeout(timeout_s),
            # Nodes close idle keep-alive connections after 5 s (--idle-timeout-ms); httpx's own
            # expiry is also 5 s, so a request could go out on a connection being closed.
            limits=httpx.Limits(keepalive_expiry=KEEPALIVE_S),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        api_key: str | None,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        url: str | None = None,
    ) -> Any:
        """The decoded JSON answer of a 2xx response; anything else raises ConsoleApiError.
        `url` sends the request to another node (a broker's own /metrics) on the same pool."""
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        target = f"{url.rstrip('/')}{path}" if url else path
        try:
            response = await self._send(method, target, json=json, params=params, headers=headers)
        except httpx.TimeoutException as exc:
            raise ConsoleApiError(
                REQUEST_TIMED_OUT, f"{method} {target}: no answer in time ({exc})", 504
            ) from exc
        except httpx.HTTPError as exc:
            raise ConsoleApiError(
                NETWORK_EXCEPTION, f"{method} {target}: cannot reach the cluster ({exc})", 502
            ) from exc
        if response.status_code >= 400:
            raise _error_of(response)
        if "json" not in response.headers.get("content-type", ""):
            return response.text
        return response.json()

    async def _send(self, method: str, target: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.request(method, target, **kwargs)
        except httpx.RemoteProtocolError:
            # The node closed a pooled connection as this request went out on it (seen as
            # "Server disconnected without sending a response"): a read is safe to send
            # again, once, on a fresh connection; a write is not (it may have been applied).
            if method not in IDEMPOTENT:
                raise
            return await self._http.request(method, target, **kwargs)

    async def get(self, path: str, api_key: str | None, **params: Any) -> Any:
        return await self.request("GET", path, api_key, params=params or None)

    async def post(self, path: str, api_key: str | None, body: Any) -> Any:
        return await self.request("POST", path, api_key, json=body)

    async def patch(self, path: str, api_key: str | None, body: Any) -> Any:
        return await self.request("PATCH", path, api_key, json=body)

    async def delete(self, path: str, api_key: str | None) -> Any:
        return await self.request("DELETE", path, api_key)

    async def text_of(self, node_url: str, path: str, api_key: str | None) -> str:
        """A text document of one node (Prometheus /metrics)."""
        return str(await self.request("GET", path, api_key, url=node_url))

    async def stream_lines(
        self, path: str, api_key: str | None, params: dict[str, Any]
    ) -> AsyncIterator[dict[str, Any]]:
        """The JSON lines of a streamed answer (a search), as they arrive, with no overall
        timeout (only between lines). Leaving the iteration closes the request, which
        cancels the work behind it."""
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        timeout = httpx.Timeout(10.0, read=120.0)
        try:
            async with self._http.stream(
                "GET", path, params=params, headers=headers, timeout=timeout
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise _error_of(response)
                async for line in response.aiter_lines():
                    if line:
                        yield orjson.loads(line)
        except httpx.TimeoutException as exc:
            raise ConsoleApiError(REQUEST_TIMED_OUT, f"GET {path}: no answer in time", 504) from exc
        except httpx.HTTPError as exc:
            raise ConsoleApiError(
                NETWORK_EXCEPTION, f"GET {path}: cannot reach the cluster ({exc})", 502
            ) from exc
