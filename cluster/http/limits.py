"""Quotas and overload protection for public requests, as one pure ASGI middleware.

Everything here is decided before the body is read, so a refused request never costs
memory and a refused produce never writes anything (the client retries it as it is):
- a declared body over the request limit: 413; a streamed (chunked) one is cut off there;
- a principal over its byte-rate quota: 429 THROTTLING_QUOTA_EXCEEDED, `Retry-After` and
  `X-Tierlog-Throttle-Ms`. Produce counts request body bytes as they arrive; fetch counts
  response bytes, so a big answer throttles the next request (Kafka delays the response
  instead; an HTTP client cannot be muted, but it can be told when to come back);
- the broker's in-flight body bytes over their budget, after a short wait, or too many
  long-polls: 503 with `Retry-After` (the broker is busy, not the client over a quota);
- a body that does not arrive within the body-read deadline (slowloris): 408, connection
  closed.
Cluster traffic (replication, forwarding, tiering) is never limited here.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cluster import metrics
from cluster.http.inflight import ByteBudget, SlotCounter
from cluster.http.quota_manager import ANONYMOUS, CLUSTER_PRINCIPAL, QuotaKind, QuotaManager
from cluster.http.responses import error_response
from cluster.internal_http import CLUSTER_TOKEN_HEADER
from logformat.errors import ErrorCode, TierlogError
from metadata.quotas import QuotaRepo

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


PRINCIPAL_SCOPE_KEY = "tierlog.principal"  # set by the authentication middleware
# An async callable(n): the request's body decodes to n more bytes (api/records.py).
DECODED_SCOPE_KEY = "tierlog.charge_decoded"
THROTTLE_HEADER = "x-tierlog-throttle-ms"
_PRODUCE = re.compile(r"^/topics/[^/]+/records$")
_FETCH = re.compile(r"^/topics/[^/]+/partitions/[^/]+/records$")
_SEARCH = re.compile(r"^/topics/[^/]+/search$")  # its hits are reads: the consumer quota
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024


class LimitSettings(NamedTuple):
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_inflight_bytes: int = 256 * 1024 * 1024
    inflight_wait_s: float = 1.0  # how long a request waits for in-flight room
    max_long_polls: int = 1024
    body_timeout_s: float = 30.0  # the whole body must arrive within this


class LimitError(TierlogError):
    """A TierlogError whose response carries its own status and headers."""

    def __init__(
        self, code: ErrorCode, message: str, status: int, headers: dict[str, str], **extra: object
    ) -> None:
        super().__init__(code, message, **extra)
        self.status = status
        self.headers = headers

    @property
    def http_status(self) -> int:
        return self.status


def throttled(throttle_ms: int, what: str) -> LimitError:
    return LimitError(
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        f"{what}; retry in {throttle_ms} ms",
        429,
        {
            "Retry-After": str(max(1, math.ceil(throttle_ms / 1000))),
            THROTTLE_HEADER: str(throttle_ms),
        },
        throttle_time_ms=throttle_ms,
    )


def busy(reason: str, message: str) -> LimitError:
    metrics.REJECTED_REQUESTS.labels(reason).inc()
    return LimitError(ErrorCode.REQUEST_TIMED_OUT, message, 503, {"Retry-After": "1"})


def _too_large(size: int, limit: int) -> LimitError:
    metrics.REJECTED_REQUESTS.labels("too_large").inc()
    return LimitError(
        ErrorCode.RECORD_LIST_TOO_LARGE,
        f"request body of {size} bytes exceeds the broker's limit of {limit} bytes",
        413,
        {},
    )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _kind(method: str, path: str) -> QuotaKind | None:
    if method == "POST" and _PRODUCE.match(path):
        return QuotaKind.PRODUCE
    if method == "GET" and (_FETCH.match(path) or _SEARCH.match(path)):
        return QuotaKind.FETCH
    return None


def _long_poll(scope: Scope) -> bool:
    raw = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("wait_ms", ["0"])[-1]
    return raw.isdigit() and int(raw) > 0


class RequestLimits:
    def __init__(
        self,
        app: ASGIApp,
        settings: LimitSettings,
        quotas: QuotaManager,
        cluster_secret: Callable[[], str],
        long_polls: SlotCounter | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.quotas = quotas
        self.cluster_secret = cluster_secret
        self.inflight = ByteBudget(settings.max_inflight_bytes)
        self.long_polls = long_polls or SlotCounter(settings.max_long_polls)

    def principal(self, scope: Scope) -> str:
        given = scope.get(PRINCIPAL_SCOPE_KEY)
        if isinstance(given, str) and given:
            return given
        # Without the authentication middleware: the cluster token still marks internal calls.
        token = _header(scope, CLUSTER_TOKEN_HEADER.lower().encode())
        secret = self.cluster_secret()
        if token and secret and hmac.compare_digest(token, secret):
            return CLUSTER_PRINCIPAL
        return ANONYMOUS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        principal = self.principal(scope)
        if principal == CLUSTER_PRINCIPAL:
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self._limited(scope, receive, tracking, principal)
        except LimitError as exc:  # refused before the application ran, or it let one escape
            if started:
                raise
            await error_response(exc, exc.headers)(scope, receive, send)

    async def _limited(self, scope: Scope, receive: Receive, send: Send, principal: str) -> None:
        s = self.settings
        kind = _kind(scope["method"], scope["path"])
        declared_raw = _header(scope, b"content-length")
        declared = int(declared_raw) if declared_raw and declared_raw.isdigit() else 0
        if declared > s.max_request_bytes:
            raise _too_large(declared, s.max_request_bytes)
        if kind is not None:
            throttle_ms = self.quotas.throttle_ms(kind, principal)
            if throttle_ms > 0:
                metrics.QUOTA_THROTTLED_REQUESTS.labels(kind.value, principal).inc()
                metrics.QUOTA_THROTTLE_SECONDS.labels(kind.value, principal).inc(throttle_ms / 1000)
                raise throttled(throttle_ms, f"{principal} is over its {kind.key} quota")
        polling = kind is QuotaKind.FETCH and _long_poll(scope)
        if polling and not self.long_polls.try_take():
            raise busy("long_polls", f"this broker serves {s.max_long_polls} long polls at most")
        body = _BodyReader(self, receive, principal, kind)
        try:
            # The declared size is reserved whole before any byte is read: an admitted request
            # never waits for room mid-body, so a flood cannot fill the budget with halves of
            # requests that all stall (it did, when bytes were taken as they arrived). Slow
            # clients hold their reservation until the body-read deadline; with auth on they
            # must hold a valid key to get one.
            if declared > 0:
                if not await self.inflight.acquire(declared, s.inflight_wait_s):
                    raise busy("inflight_bytes", self._full_message())
                body.reserved = declared
            scope[DECODED_SCOPE_KEY] = body.charge_decoded
            await self.app(scope, body.receive, self._counting_send(send, principal, kind))
        finally:
            if polling:
                self.long_polls.give_back()
            self.inflight.release(body.reserved)

    def _full_message(self) -> str:
        limit = self.settings.max_inflight_bytes
        return f"the broker's in-flight request bytes are at their limit ({limit}); retry later"

    def _counting_send(self, send: Send, principal: str, kind: QuotaKind | None) -> Send:
        if kind is not QuotaKind.FETCH:
            return send
        quotas = self.quotas

        async def counting(message: Message) -> None:
            if message["type"] == "http.response.body":
                quotas.record(QuotaKind.FETCH, principal, len(message.get("body", b"")))
            await send(message)

        return counting


class _BodyReader:
    """The request's receive, under the body-read deadline and the size limit, taking
    in-flight bytes as they arrive and counting produce bytes against the quota."""

    def __init__(
        self, limits: RequestLimits, receive: Receive, principal: str, kind: QuotaKind | None
    ) -> None:
        self.limits = limits
        self.inner = receive
        self.principal = principal
        self.kind = kind
        self.reserved = 0
        self.size = 0
        self.done = False
        self.deadline = asyncio.get_running_loop().time() + limits.settings.body_timeout_s

    async def receive(self) -> Message:
        if self.done:  # after the body: e.g. listening for a disconnect, no deadline
            return await self.inner()
        try:
            async with asyncio.timeout_at(self.deadline):
                message = await self.inner()
        except TimeoutError:
            metrics.REJECTED_REQUESTS.labels("body_timeout").inc()
            raise LimitError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"the request body did not arrive within {self.limits.settings.body_timeout_s} s",
                408,
                {"Connection": "close"},
            ) from None
        if message["type"] != "http.request":
            self.done = True
            return message
        await self._account(len(message.get("body", b"")))
        self.done = not message.get("more_body", False)
        return message

    async def charge_decoded(self, n: int) -> None:
        """The body grows by `n` bytes once decoded: held in the in-flight budget like body
        bytes (released with them) and counted against the produce quota."""
        if n <= 0:
            return
        limits = self.limits
        if not await limits.inflight.acquire(n, limits.settings.inflight_wait_s, self.reserved):
            raise busy("inflight_bytes", limits._full_message())
        self.reserved += n
        if self.kind is QuotaKind.PRODUCE:
            limits.quotas.record(QuotaKind.PRODUCE, self.principal, n)

    async def _account(self, n: int) -> None:
        s = self.limits.settings
        self.size += n
        if self.size > s.max_request_bytes:
            raise _too_large(self.size, s.max_request_bytes)
        # Bodies with a Content-Length were reserved whole at admission; only a chunked body
        # (or one longer than declared) takes room here: wait briefly, then refuse mid-body.
        need = self.size - self.reserved
        if need > 0:
            if not await self.limits.inflight.acquire(need, s.inflight_wait_s):
                raise busy("inflight_bytes", self.limits._full_message())
            self.reserved += need
        if self.kind is QuotaKind.PRODUCE:
            self.limits.quotas.record(QuotaKind.PRODUCE, self.principal, n)


def limits_middleware(
    settings: LimitSettings,
    engine: Engine,
    cluster_secret: Callable[[], str],
    quotas: QuotaManager | None = None,
    long_polls: SlotCounter | None = None,
) -> Callable[[ASGIApp], ASGIApp]:
    """RequestLimits with quotas from `engine`'s database, for `app.add_middleware`; or with
    the node's own quota manager and long-poll slots, when other listeners share them."""
    shared_quotas = quotas or QuotaManager(QuotaRepo(engine).load)

    def make(app: ASGIApp) -> ASGIApp:
        return RequestLimits(app, settings, shared_quotas, cluster_secret, long_polls)

    return make
