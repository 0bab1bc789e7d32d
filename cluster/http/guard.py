"""Connection-level limits, enforced in the HTTP parser before any application code runs.

The ASGI layer (cluster/http/limits.py) only sees a request once its headers are complete, and
authentication comes after that, so these guards protect what happens before:
- the request line and headers together over `max_header_bytes`, or more than `max_headers`
  header fields: 431, connection closed (httptools itself buffers headers without a bound);
- headers that do not arrive within `header_timeout_s` of the connection opening or of the
  request's first byte (slowloris): 408, connection closed; a connection that never sends
  anything is closed silently;
- an idle keep-alive connection is closed after `idle_timeout_s`;
- more than `max_connections_per_address` open connections from one client address: 429 at
  once, connection closed;
- `/healthz` and `/readyz` keep a reserve of `health_reserve` request slots beyond the
  server-wide `max_connections` cap, so a connection flood never makes them answer 503.
"""

from __future__ import annotations

import asyncio
from asyncio.events import TimerHandle
from collections import Counter
from typing import Any, ClassVar, NamedTuple

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from cluster import metrics
from cluster import node_settings as node
from logformat.errors import ErrorCode

HEALTH_PATHS = frozenset({b"/healthz", b"/readyz"})
_HEAD_END = b"\r\n\r\n"


class HttpLimits(NamedTuple):
    max_header_bytes: int = node.MAX_HEADER_BYTES.default
    max_headers: int = node.MAX_HEADERS.default
    header_timeout_s: float = node.HEADER_TIMEOUT_MS.default / 1000
    idle_timeout_s: float = node.IDLE_TIMEOUT_MS.default / 1000
    max_connections: int = node.MAX_CONNECTIONS.default
    max_connections_per_address: int = node.MAX_CONNECTIONS_PER_ADDRESS.default
    health_reserve: int = 32


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a request that is refused."""


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits above. Subclassed per server by
    `guarded_protocol`, which binds the limits and the per-address connection counts."""

    limits: ClassVar[HttpLimits] = HttpLimits()
    open_per_address: ClassVar[Counter[str]] = Counter()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn types it int; call_later takes any float.
        self.timeout_keep_alive = self.limits.idle_timeout_s  # type: ignore[assignment]
        self._address: str | None = None
        self._refused = False
        self._in_head = True  # reading a request line and headers
        self._head_bytes = 0
        self._head_tail = b""  # the last bytes of head seen, to find a split terminator
        self._header_count = 0
        self._head_timer: TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else None
        if address is not None:
            if self.open_per_address[address] >= self.limits.max_connections_per_address:
                self._refuse(
                    429,
                    "connections_per_address",
                    ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                    f"{address} already has {self.limits.max_connections_per_address} "
                    "connections open to this server (the per-address limit)",
                    {"retry-after": "1"},
                )
                return
            self.open_per_address[address] += 1
            self._address = address
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        if self._address is not None:
            self.open_per_address[self._address] -= 1
            if self.open_per_address[self._address] <= 0:
                del self.open_per_address[self._address]
            self._address = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._unset_keepalive_if_required()
        if self._in_head:
            if self._head_timer is None:
                self._arm_head_timer()
            self._count_head(data)
            if self._head_bytes > self.limits.max_header_bytes:
                self._refuse_head_size()
                return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _HeadRefused):
                self._refuse_head_size()
            else:
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
        except httptools.HttpParserError:
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()

    def _unsupported_upgrade_warning(self) -> None:
        # No route serves WebSockets (uvicorn runs with ws="none"), nor any other upgrade: the
        # request gets its plain HTTP answer. uvicorn's own warning, twice per request, would
        # tell operators to install a WebSocket library, and any client could fill the log.
        self.logger.debug("upgrade request answered as plain HTTP")

    def _count_head(self, data: bytes) -> None:
        """Add the part of `data` that belongs to the head (up to the blank line)."""
        joined = self._head_tail + data
        end = joined.find(_HEAD_END)
        if end >= 0:
            self._head_bytes += max(0, end + len(_HEAD_END) - len(self._head_tail))
        else:
            self._head_bytes += len(data)
        self._head_tail = joined[-(len(_HEAD_END) - 1) :]

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            raise _HeadRefused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._head_tail = b""
        self._header_count = 0
        self._disarm_head_timer()
        limit = self.limits.max_connections
        # A health check is one cheap request: it is refused only when the tasks (not the
        # connections, which a flood holds) exceed the cap and its reserve.
        health = self.url.split(b"?", 1)[0] in HEALTH_PATHS
        if health and len(self.tasks) < limit + self.limits.health_reserve:
            self.limit_concurrency = None
        else:
            self.limit_concurrency = limit
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True  # the next bytes on this connection start a new request

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._in_head:
            return
        if self._head_bytes == 0:  # never sent a byte of this request: just an idle socket
            metrics.REJECTED_REQUESTS.labels("idle_connection").inc()
            self._refused = True
            self.transport.close()
            return
        self._refuse(
            408,
            "header_timeout",
            ErrorCode.REQUEST_TIMED_OUT,
            f"the request headers did not arrive within {self.limits.header_timeout_s} s",
        )

    def _refuse_head_size(self) -> None:
        self._refuse(
            431,
            "header_too_large",
            ErrorCode.INVALID_REQUEST,
            f"request headers exceed this server's limit of {self.limits.max_header_bytes} "
            f"bytes or {self.limits.max_headers} fields",
        )

    def _refuse(
        self,
        status: int,
        reason: str,
        code: ErrorCode,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer with a JSON error in the API's shape and close the connection."""
        metrics.REJECTED_REQUESTS.labels(reason).inc()
        self._refused = True
        self._disarm_head_timer()
        body = orjson.dumps({"error_code": code.value, "message": message})
        lines = [STATUS_LINE[status]]
        for name, value in {
            "content-type": "application/json",
            "content-length": str(len(body)),
            "connection": "close",
            **(headers or {}),
        }.items():
            lines.append(f"{name}: {value}\r\n".encode("latin-1"))
        lines += [b"\r\n", body]
        if not self.transport.is_closing():
            self.transport.write(b"".join(lines))
            self.transport.close()


def guarded_protocol(limits: HttpLimits) -> type[GuardedHttpProtocol]:
    """A protocol class for one server: its limits and its own per-address counts."""
    return type(
        "ServerHttpProtocol",
        (GuardedHttpProtocol,),
        {"limits": limits, "open_per_address": Counter()},
    )
