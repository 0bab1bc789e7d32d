"""Client-side errors: the API's Kafka-named errors, plus what only a client can raise.

Every error is a `logformat.errors.TierlogError`, so `except TierlogError` catches them all.
`ApiError.name` keeps the server's error name even when this client's ErrorCode enum does not
know it (a newer server), so nothing is lost in translation.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from logformat.errors import ErrorCode, TierlogError

# Errors that a later attempt may not see (Kafka's RetriableException family).
RETRIABLE = frozenset(
    {
        "NETWORK_EXCEPTION",
        "REQUEST_TIMED_OUT",
        "NOT_LEADER_OR_FOLLOWER",
        "LEADER_NOT_AVAILABLE",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "KAFKA_STORAGE_ERROR",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "THROTTLING_QUOTA_EXCEEDED",
        "COORDINATOR_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "NOT_COORDINATOR",
    }
)
# Errors that mean "the metadata you routed by is stale": refresh before retrying.
STALE_METADATA = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "LEADER_NOT_AVAILABLE",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "NETWORK_EXCEPTION",
    }
)
# Group membership errors after which a consumer must join again (KIP-848).
FENCED_MEMBER = frozenset({"STALE_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH"})


def _code(name: str, fallback: ErrorCode) -> ErrorCode:
    try:
        return ErrorCode(name)
    except ValueError:
        return fallback


class ApiError(TierlogError):
    """An error answer from a broker (or no answer at all: status 0, NETWORK_EXCEPTION)."""

    def __init__(self, name: str, message: str, status: int = 0, **extra: object) -> None:
        super().__init__(_code(name, ErrorCode.UNKNOWN_SERVER_ERROR), message, **extra)
        self.args = (f"{name}: {message}",)
        self.name = name
        self.status = status
        # How long the server asked us to wait before retrying (429/503 Retry-After).
        self.retry_after_s = 0.0

    @property
    def retriable(self) -> bool:
        return self.name in RETRIABLE or self.status in (429, 502, 503, 504)

    @property
    def stale_metadata(self) -> bool:
        return self.name in STALE_METADATA

    @property
    def fenced_member(self) -> bool:
        return self.name in FENCED_MEMBER


class NetworkError(ApiError):
    """The request got no answer: refused, reset, or timed out. The outcome is unknown."""

    def __init__(self, url: str, exc: BaseException) -> None:
        timed_out = isinstance(exc, httpx.TimeoutException)
        name = "REQUEST_TIMED_OUT" if timed_out else "NETWORK_EXCEPTION"
        super().__init__(name, f"{url}: {type(exc).__name__}: {exc}")
        self.url = url
        # A refused connection never reached the broker; anything else may have.
        self.connect_failed = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)


class ClientTimeoutError(TierlogError):
    """A client-side wait (max_block_ms, delivery_timeout_ms, a call's timeout) ran out."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class ClientClosedError(TierlogError):
    def __init__(self, what: str) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, f"the {what} is closed")


class NoOffsetForPartition(TierlogError):
    """auto_offset_reset="none" and a partition has no committed offset (Kafka's exception)."""

    def __init__(self, partitions: list[Any]) -> None:
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"no committed offset and auto_offset_reset='none' for {sorted(partitions)}",
        )
        self.partitions = partitions


class OffsetOutOfRange(TierlogError):
    """A fetch position left the log and auto_offset_reset="none" forbids resetting it."""

    def __init__(self, positions: dict[Any, int]) -> None:
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"positions out of range and auto_offset_reset='none': {positions}",
        )
        self.positions = positions


class CommitFailedError(TierlogError):
    """The group no longer accepts this member's commit (it was fenced or left)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, message)


def retry_after_s(headers: httpx.Headers) -> float:
    """The server's wait before a retry: X-Tierlog-Throttle-Ms (exact), else Retry-After
    (whole seconds; an HTTP date is not used by tierlog and counts as none)."""
    for name, scale in (("x-tierlog-throttle-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name, "").strip()
        if raw.isdigit():
            return int(raw) / scale
    return 0.0


def error_from_response(response: httpx.Response) -> ApiError:
    """The ApiError an error response carries (`{"error_code", "message", ...}`)."""
    error = _error_of(response)
    error.retry_after_s = retry_after_s(response.headers)
    return error


def _error_of(response: httpx.Response) -> ApiError:
    doc: Any = None
    try:
        doc = orjson.loads(response.content) if response.content else None
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error_code"), str):
        extra = {k: v for k, v in doc.items() if k not in ("error_code", "message")}
        return ApiError(
            doc["error_code"], str(doc.get("message", "")), response.status_code, **extra
        )
    name = {
        404: "NOT_FOUND",
        413: "RECORD_LIST_TOO_LARGE",
        429: "THROTTLING_QUOTA_EXCEEDED",
        503: "LEADER_NOT_AVAILABLE",
    }.get(response.status_code, "UNKNOWN_SERVER_ERROR")
    text = response.text[:500] if response.content else ""
    return ApiError(name, f"HTTP {response.status_code}: {text}", response.status_code)
