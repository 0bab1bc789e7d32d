"""httpx's client API over aiohttp's connection handling: nodes' calls to each other and the
Python client's requests.

Both speak through `httpx.AsyncClient` (auth flows, timeouts, the in-process harness's links,
the client tests' ASGI transports), but httpx's own HTTP/1.1 stack (httpcore, h11, anyio)
costs ~0.5 ms of CPU per 100 KB request and response on this project's machine, against
~0.25 ms through aiohttp, whose parser is C: a follower spent 70% of its GIL time in it
(docs/benchmarks.md). This transport hands each request to an aiohttp session and the
response back to httpx.

aiohttp's errors become the httpx errors httpx itself raises for the same event, because
callers tell them apart: a refused connection is `ConnectError`; a reset one `ReadError`; a
peer that closed it mid-answer `RemoteProtocolError` (ingest/replication/death_signal.py reads
these three as "the peer is gone"); a timeout is a timeout, never one of those.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager

import aiohttp
import httpx

from http_transport.trust import trust

CHUNK = 1 << 20  # a streamed body's pieces: whatever has arrived, up to this
_FRAMING = ("content-length", "transfer-encoding")  # aiohttp frames the body it is given
KEEPALIVE_S = 5.0


def _mapped(exc: Exception, request: httpx.Request) -> httpx.TransportError:
    """The httpx error httpx raises for what `exc` says happened."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message, request=request)
    if isinstance(exc, TimeoutError):  # a read timed out (SocketTimeoutError and the rest)
        return httpx.ReadTimeout(message, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):  # refused, unreachable, DNS, TLS
        return httpx.ConnectError(message, request=request)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(message, request=request)
    if isinstance(exc, aiohttp.ClientOSError | ConnectionError):  # reset while talking
        return httpx.ReadError(message, request=request)
    if isinstance(exc, aiohttp.ClientResponseError):  # not an HTTP answer
        return httpx.RemoteProtocolError(message, request=request)
    return httpx.TransportError(message, request=request)


@contextmanager
def _httpx_errors(request: httpx.Request | Callable[[], httpx.Request]) -> Iterator[None]:
    """aiohttp's errors as httpx's; `request` (the one they carry) may be made only once one
    is raised."""
    try:
        yield
    except (aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
        raise _mapped(exc, request if isinstance(request, httpx.Request) else request()) from exc


def _client_timeout(
    pool: float | None, connect: float | None, read: float | None
) -> aiohttp.ClientTimeout:
    """httpx's timeouts as aiohttp's: the wait for a pooled connection, the connect, each
    read; no bound on the whole exchange (a long answer may take its time)."""
    return aiohttp.ClientTimeout(total=None, connect=pool, sock_connect=connect, sock_read=read)


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response, self._request = response, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors(self._request):
            async for chunk in self._response.content.iter_chunked(CHUNK):
                yield chunk

    async def aclose(self) -> None:
        self._response.release()


class AiohttpTransport(httpx.AsyncBaseTransport):
    """One aiohttp session (made on first use, inside the running loop) per client.

    `verify` as httpx takes it (True, False, a context or a CA bundle's path), and the TLS
    context httpx would build from it (certifi's bundle, SSL_CERT_FILE / SSL_CERT_DIR).
    `trust_env`: proxies from HTTP(S)_PROXY / NO_PROXY, as httpx's default; nodes pass False,
    as they reach each other directly. Idle connections are kept 5 s, as httpx keeps them
    (a node closes its idle ones after --idle-timeout-ms, 5 s by default)."""

    def __init__(
        self,
        verify: ssl.SSLContext | str | bool = True,
        max_connections: int = 100,
        trust_env: bool = False,
    ) -> None:
        self._ssl = trust(verify)  # the process's shared context (http_transport/trust.py)
        self._max, self._trust_env = max_connections, trust_env
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._max, ssl=self._ssl, keepalive_timeout=KEEPALIVE_S
            )
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, trust_env=self._trust_env
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout", {})
        body = await request.aread()
        with _httpx_errors(request):
            response = await self._open().request(
                request.method,
                str(request.url),
                headers=[kv for kv in request.headers.multi_items() if kv[0] not in _FRAMING],
                data=body or None,
                allow_redirects=False,
                timeout=_client_timeout(
                    timeout.get("pool"), timeout.get("connect"), timeout.get("read")
                ),
            )
        return httpx.Response(
            response.status,
            headers=list(response.raw_headers),
            stream=_Body(response, request),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def post(
        self, url: str, content: bytes, headers: dict[str, str], timeout: httpx.Timeout
    ) -> tuple[int, bytes]:
        """POST `content` and read the whole answer, with no httpx request or response made
        on the way (cluster/internal_http.py post_direct: a follower's replica fetches, where
        they were half of this transport's CPU). Errors as handle_async_request's."""
        with _httpx_errors(lambda: httpx.Request("POST", url, headers=headers)):
            response = await self._open().post(
                url,
                headers=headers,
                data=content,
                allow_redirects=False,
                timeout=_client_timeout(timeout.pool, timeout.connect, timeout.read),
            )
            try:
                return response.status, await response.read()
            finally:
                response.release()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
