"""The one HTTP client nodes use to call each other: replica fetches, forwarded requests,
tiering's segment downloads, fetch nodes' hot reads and offset lookups, the groups' lookups.

Every request carries the cluster credential (read per request: a node loads the cluster
secret from Postgres after it builds its clients), and HTTPS trusts the CA bundle the
composition root names with `trust_ca` (each role's `--tls-ca` / TIERLOG_TLS_CA), so a cluster
whose certificates come from a private CA can talk to itself; else httpx's default (certifi's
bundle, or SSL_CERT_FILE / SSL_CERT_DIR). A request that must not carry the credential passes
`auth=None`.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Generator
from urllib.parse import quote

import httpx
from starlette.requests import Request

from http_transport.aiohttp_transport import AiohttpTransport
from http_transport.trust import bundle_trust, default_trust

CLUSTER_TOKEN_HEADER = "x-tierlog-cluster-token"
FORWARDED_HEADER = "x-tierlog-forwarded"  # a request one node passed on to another


_trusted_ca: list[str | None] = [None]  # one per process: set once, at start-up


def trust_ca(path: str | None) -> None:
    """Make `path` (a PEM CA bundle) the trust of this process's node-to-node clients."""
    _trusted_ca[0] = path


def internal_verify() -> ssl.SSLContext:
    """The process's one context for it (http_transport/trust.py: not one per client)."""
    path = _trusted_ca[0]
    return bundle_trust(path) if path else default_trust()


class ClusterToken(httpx.Auth):
    """The cluster credential on every request."""

    def __init__(self, token: Callable[[], str]) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers[CLUSTER_TOKEN_HEADER] = self._token()
        yield request


def internal_transport() -> httpx.AsyncBaseTransport:
    # aiohttp carries the bytes: httpx's own HTTP/1.1 stack costs ~2x the CPU per request
    return AiohttpTransport(verify=internal_verify())


# How a node reaches its peers (replica fetches, forwarded requests): the transport their
# requests go over. Nodes talk HTTP (internal_transport); tests/harness/ passes one routed to
# brokers in the same process, whose links the test can cut.
PeerLink = Callable[[], httpx.AsyncBaseTransport]


def internal_async_client(
    token: Callable[[], str], timeout: httpx.Timeout, link: PeerLink = internal_transport
) -> httpx.AsyncClient:
    return httpx.AsyncClient(auth=ClusterToken(token), timeout=timeout, transport=link())


async def post_direct(
    transport: httpx.AsyncBaseTransport,
    url: str,
    content: bytes,
    token: str,
    timeout: httpx.Timeout,
) -> tuple[int, bytes]:
    """POST `content` to `url` through `transport` alone, with the cluster credential; the
    answer's status and body. None of a client's layers (cookie jar, auth flow, redirects,
    default headers): a follower's replica fetch, twice a second per leader when idle, needs
    none of them, and they were half its client-side CPU (py-spy, an idle 3-broker cluster).
    Over a real peer link not even httpx's request and response models (AiohttpTransport.post:
    half of what was left); the harness's links take the httpx path.
    The transport's errors are a client's (httpx.TransportError and its kinds)."""
    headers = {CLUSTER_TOKEN_HEADER: token}
    if isinstance(transport, AiohttpTransport):  # a real peer link: straight to aiohttp
        return await transport.post(url, content, headers, timeout)
    request = httpx.Request(
        "POST",
        url,
        content=content,
        headers=headers,
        extensions={"timeout": timeout.as_dict()},
    )
    response = await transport.handle_async_request(request)
    try:
        return response.status_code, await response.aread()
    finally:
        await response.aclose()


def internal_client(token: Callable[[], str], timeout: httpx.Timeout) -> httpx.Client:
    """The blocking flavour, for the tiering worker's threads."""
    return httpx.Client(auth=ClusterToken(token), timeout=timeout, verify=internal_verify())


def forwarded_path(request: Request) -> str:
    """The path of a request to pass on to another node, as the client sent it (still
    percent-encoded): the decoded path may hold characters (controls, non-ASCII) that are not
    valid in a URL, and httpx refuses those."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes) and raw.isascii():
        return raw.decode("ascii")
    return quote(request.url.path, safe="/")
