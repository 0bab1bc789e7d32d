"""Refuses cross-site writes from web pages, as one pure ASGI middleware.

A browser sends a "simple" request (POST with a text/plain, form-urlencoded or multipart
body, or no type at all) to any address without a CORS preflight, so a page a developer
visits could write into a broker on 127.0.0.1. Two rules close that:
- a body on a public endpoint must carry one of its documented media types (415
  UNSUPPORTED_MEDIA_TYPE otherwise); application/json and the Arrow stream type cannot be
  sent cross-site without a preflight, which this server never approves;
- an unsafe request (POST/PUT/PATCH/DELETE) whose `Origin` header is present and is not the
  node's own is refused with 403 (browsers always send `Origin` on cross-site POSTs).
Clients that are not browsers send no `Origin`. Cluster endpoints (/internal/...) take
binary bodies and the cluster token; only the Origin rule applies to them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from cluster import metrics
from cluster.http.limits import LimitError
from cluster.http.responses import error_response
from logformat.errors import ErrorCode

JSON = "application/json"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_PRODUCE = re.compile(r"^/topics/[^/]+/records$")
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def own_origins(advertised_urls: Iterable[str], host: str, port: int, tls: bool) -> frozenset[str]:
    """The origins a node answers as: its advertised URLs, and its listen address (with the
    loopback names when it listens on loopback or on every address)."""
    scheme = "https" if tls else "http"
    hosts = {host if ":" not in host else f"[{host}]"}
    if host in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""):
        hosts.update(_LOOPBACK)
    origins = {f"{scheme}://{h}:{port}".lower() for h in hosts}
    for url in advertised_urls:
        m = re.match(r"^(https?://[^/]+)", url.strip().lower())
        if m:
            origins.add(m.group(1))
            default = ":443" if m.group(1).startswith("https:") else ":80"
            origins.add(m.group(1).removesuffix(default))
    return frozenset(origins)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _has_body(scope: Scope) -> bool:
    length = _header(scope, b"content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return _header(scope, b"transfer-encoding") is not None


# Confluent's registry clients send this type (registry/, mounted under /schema-registry);
# like JSON, a browser cannot send it cross-site without a preflight.
SCHEMA_REGISTRY = ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json")


def accepted_types(path: str) -> tuple[str, ...]:
    """The media types a public endpoint's body may have."""
    if path.startswith("/schema-registry/"):
        return (JSON, *SCHEMA_REGISTRY)
    return (JSON, ARROW_STREAM) if _PRODUCE.match(path) else (JSON,)


def _refused(status: int, code: ErrorCode, message: str, reason: str) -> LimitError:
    metrics.REJECTED_REQUESTS.labels(reason).inc()
    return LimitError(code, message, status, {})


class CrossSiteGuard:
    def __init__(self, app: ASGIApp, origins: frozenset[str]) -> None:
        self.app = app
        self.origins = origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in _UNSAFE:
            refusal = self._check(scope)
            if refusal is not None:
                await error_response(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _check(self, scope: Scope) -> LimitError | None:
        method, path = scope["method"], scope["path"]
        origin = _header(scope, b"origin")
        if origin is not None and origin.strip().lower() not in self.origins:
            return _refused(
                403,
                ErrorCode.INVALID_REQUEST,
                f"cross-site request refused: {method} {path} from Origin {origin!r}, which is "
                f"not this node's ({', '.join(sorted(self.origins))})",
                "cross_site",
            )
        if path.startswith("/internal/") or not _has_body(scope):
            return None
        raw = _header(scope, b"content-type") or ""
        media = raw.split(";")[0].strip().lower()
        allowed = accepted_types(path)
        if media not in allowed:
            return _refused(
                415,
                ErrorCode.UNSUPPORTED_MEDIA_TYPE,
                f"{method} {path} takes a body of type {' or '.join(allowed)}, "
                f"not {media or 'none'!r}",
                "media_type",
            )
        return None
