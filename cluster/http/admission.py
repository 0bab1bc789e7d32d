"""Concurrency limits for the expensive public requests (issue 24 K9), one pure ASGI
middleware on brokers and fetch nodes:
- searches (`GET /topics/{topic}/search`): at most `searches_per_principal` at once for one
  principal and `searches_per_node` on this node; a value-substring search reads a whole
  topic, so a few of them must not starve every other client;
- admin requests (topic create, delete, config change, partition add): at most
  `admin_per_node` at once on this node.
Over a limit: 429 THROTTLING_QUOTA_EXCEEDED with `Retry-After`, before anything runs. A slot
is held for the whole answer (a search's stream included) and given back when it ends; a
search whose client has gone away ends at once (the streamed answer is cancelled on the
disconnect: cluster/http/search_stream.py), so it gives its slot back too.
Cluster traffic (a broker relaying another node's search, forwarding) is not limited here:
the node the client called has counted it already."""

from __future__ import annotations

import re
from collections import Counter
from typing import NamedTuple

from prometheus_client import Counter as PromCounter
from prometheus_client import Gauge
from starlette.types import ASGIApp, Receive, Scope, Send

from cluster import node_settings as node
from cluster.authorizer import ANONYMOUS, CLUSTER
from cluster.http.limits import LimitError
from cluster.http.responses import error_response
from logformat.errors import ErrorCode

PRINCIPAL_SCOPE_KEY = "tierlog.principal"  # set by the authentication middleware
_SEARCH = re.compile(r"^/topics/[^/]+/search$")
_ADMIN = (
    ("POST", re.compile(r"^/topics$")),
    ("DELETE", re.compile(r"^/topics/[^/]+$")),
    ("PATCH", re.compile(r"^/topics/[^/]+/configs$")),
    ("POST", re.compile(r"^/topics/[^/]+/partitions$")),
)
RETRY_AFTER_S = 1

IN_FLIGHT = Gauge(
    "tierlog_http_concurrent_requests",
    "Searches and admin requests running on this node (issue 24 K9's limits)",
    ["kind"],
)
REFUSED = PromCounter(
    "tierlog_http_concurrency_refused_total",
    "Requests refused with 429 because too many of their kind were running",
    ["kind", "limit"],
)


class ConcurrencyLimits(NamedTuple):
    searches_per_principal: int = node.MAX_SEARCHES_PER_PRINCIPAL.default
    searches_per_node: int = node.MAX_SEARCHES.default
    admin_per_node: int = node.MAX_ADMIN_REQUESTS.default


def _kind(method: str, path: str) -> str | None:
    if method == "GET" and _SEARCH.match(path):
        return "search"
    if any(method == m and pattern.match(path) for m, pattern in _ADMIN):
        return "admin"
    return None


def _refused(kind: str, limit: str, count: int) -> LimitError:
    REFUSED.labels(kind, limit).inc()
    what = "searches" if kind == "search" else "admin requests"
    whose = "for this principal" if limit == "principal" else "on this node"
    return LimitError(
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        f"too many concurrent {what} {whose} (at most {count}); retry in {RETRY_AFTER_S} s",
        429,
        {"Retry-After": str(RETRY_AFTER_S)},
    )


class ConcurrencyGuard:
    """Counts what runs; `admit` takes a slot or says which limit refused it."""

    def __init__(self, limits: ConcurrencyLimits) -> None:
        self.limits = limits
        self.running: Counter[str] = Counter()  # kind → requests running
        self.by_principal: Counter[str] = Counter()  # searches running per principal

    def admit(self, kind: str, principal: str) -> LimitError | None:
        lim = self.limits
        if kind == "admin":
            if self.running[kind] >= lim.admin_per_node:
                return _refused(kind, "node", lim.admin_per_node)
        else:
            if self.by_principal[principal] >= lim.searches_per_principal:
                return _refused(kind, "principal", lim.searches_per_principal)
            if self.running[kind] >= lim.searches_per_node:
                return _refused(kind, "node", lim.searches_per_node)
            self.by_principal[principal] += 1
        self.running[kind] += 1
        IN_FLIGHT.labels(kind).set(self.running[kind])
        return None

    def release(self, kind: str, principal: str) -> None:
        self.running[kind] -= 1
        IN_FLIGHT.labels(kind).set(self.running[kind])
        if kind == "search":
            self.by_principal[principal] -= 1
            if self.by_principal[principal] <= 0:
                del self.by_principal[principal]


class ConcurrencyMiddleware:
    def __init__(self, app: ASGIApp, limits: ConcurrencyLimits) -> None:
        self.app = app
        self.guard = ConcurrencyGuard(limits)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = (
            _kind(scope.get("method", ""), scope.get("path", ""))
            if scope["type"] == "http"
            else None
        )
        principal = str(scope.get(PRINCIPAL_SCOPE_KEY, ANONYMOUS))
        if kind is None or principal == CLUSTER:
            await self.app(scope, receive, send)
            return
        refused = self.guard.admit(kind, principal)
        if refused is not None:
            await error_response(refused)(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.guard.release(kind, principal)
