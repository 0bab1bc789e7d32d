"""Request parsing and JSON responses shared by the route modules."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from logformat.errors import ErrorCode, TierlogError


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error_response(error: TierlogError, headers: dict[str, str] | None = None) -> JSONResponse:
    # An error may name headers of its own (Retry-After on 429/503: cluster/http/limits.py).
    merged = {**getattr(error, "headers", {}), **(headers or {})}
    return JSONResponse(error.to_json(), status_code=error.http_status, headers=merged or None)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refusing (413) before buffering more than `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise TierlogError(ErrorCode.INVALID_REQUEST, "Content-Length is not a number")
        if int(declared) > limit:
            raise _too_large(int(declared), limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(size: int, limit: int) -> TierlogError:
    return TierlogError(
        ErrorCode.RECORD_LIST_TOO_LARGE,
        f"request body of {size} bytes exceeds the broker's limit of {limit} bytes",
    )


def parse_json(body: bytes) -> Any:
    """A request body as JSON; INVALID_REQUEST naming where it is not."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, f"request body is not valid JSON: {exc}"
        ) from exc


async def json_object(request: Request, limit: int) -> dict[str, Any]:
    doc = parse_json(await read_body(request, limit))
    if not isinstance(doc, dict):
        raise TierlogError(ErrorCode.INVALID_REQUEST, "request body must be a JSON object")
    return doc


def only_fields(
    doc: dict[str, Any],
    allowed: Collection[str],
    what: str = "the request body",
    code: ErrorCode = ErrorCode.INVALID_REQUEST,
) -> None:
    """Refuse (400) a body naming a field the endpoint does not take: a misspelt or
    misplaced field silently ignored would answer 200 for a change never made."""
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise TierlogError(
            code,
            f"unknown field(s) in {what}: {', '.join(map(repr, unknown))} "
            f"(it takes {', '.join(sorted(allowed))})",
        )


def query_int(request: Request, name: str, default: int | None, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        if default is None:
            raise TierlogError(ErrorCode.INVALID_REQUEST, f"query parameter {name!r} is required")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, f"query parameter {name!r} must be an integer, got {raw!r}"
        ) from None
    if not lo <= value <= hi:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            f"query parameter {name!r} must be in [{lo}, {hi}], got {value}",
        )
    return value


def path_partition(request: Request) -> int:
    raw = request.path_params["partition"]
    try:
        value = int(raw)
    except ValueError:
        raise TierlogError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition must be a number, got {raw!r}"
        ) from None
    if value < 0 or value > 2**31 - 1:
        raise TierlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {value}")
    return value


def field_int(
    doc: dict[str, Any],
    name: str,
    default: int | None,
    lo: int,
    hi: int,
    code: ErrorCode = ErrorCode.INVALID_REQUEST,
) -> int:
    value = doc.get(name, default)
    if value is None:
        raise TierlogError(code, f"{name!r} is required")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TierlogError(code, f"{name!r} must be an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise TierlogError(code, f"{name!r} must be in [{lo}, {hi}], got {value}")
    return value


_HTTP_CODES = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}

Handler = Callable[[Request, Exception], Awaitable[Response]]


def exception_handlers(log: logging.Logger) -> dict[Any, Handler]:
    """Starlette's exception handlers for a tierlog app (broker or fetch node): every error,
    routing ones and unexpected ones included, is a Kafka-style JSON error."""

    async def tierlog_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, TierlogError)
        return error_response(exc)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = _HTTP_CODES.get(exc.status_code, ErrorCode.INVALID_REQUEST)
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return error_response(TierlogError(code, message))

    async def client_gone(request: Request, exc: Exception) -> Response:
        # The peer closed mid-body (a killed or paused broker, a client's timeout): nobody
        # reads this answer, and it is not the server's error, so no traceback.
        log.debug("client disconnected", extra={"method": request.method, "path": request.url.path})
        return error_response(TierlogError(ErrorCode.INVALID_REQUEST, "client disconnected"))

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error", extra={"method": request.method, "path": request.url.path})
        # The exception's text stays in the log: it may quote SQL, paths or other callers' data.
        message = f"internal error ({type(exc).__name__}); the node's log has the details"
        return error_response(TierlogError(ErrorCode.UNKNOWN_SERVER_ERROR, message))

    return {
        TierlogError: tierlog_error,
        HTTPException: http_error,
        ClientDisconnect: client_gone,
        Exception: unexpected,
    }


def timestamp_param(at: str) -> int:
    """`?at=<ms>` of an offsets lookup (not earliest / latest), validated."""
    try:
        ts = int(at)
    except ValueError:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            f"at must be earliest, latest or a timestamp in ms; got {at!r}",
        ) from None
    if ts < 0:
        raise TierlogError(ErrorCode.INVALID_TIMESTAMP, f"timestamp must be ≥ 0, got {ts}")
    return ts
