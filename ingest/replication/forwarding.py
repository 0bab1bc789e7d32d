"""One hop to a partition's leader: appends (as frames) and proxied reads.

A node that does not lead a partition still parses and frames the records it receives, then
sends the frames to the leader's internal append endpoint; reads are proxied as they came.
Forwarded requests carry a header so they are never forwarded a second time.

A forwarded append that fails is reported by what the failure proves: no connection means
nothing was sent (LEADER_NOT_AVAILABLE); a connection that broke or went quiet after the
records were sent leaves the outcome unknown (REQUEST_TIMED_OUT, as Kafka reports it), since
the leader may have written them. Either is retriable; only an idempotent producer's retry
is sure not to duplicate.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
from starlette.requests import Request
from starlette.responses import Response

from cluster.http.limits import LimitError
from cluster.internal_http import (
    FORWARDED_HEADER,
    PeerLink,
    forwarded_path,
    internal_async_client,
    internal_transport,
)
from cluster.search_relay import leader_lines
from ingest.replication.partition import AppendResult
from logformat.errors import ErrorCode, TierlogError

_KEEP_HEADERS = (
    "content-type",
    "x-tierlog-next-offset",
    "x-tierlog-high-watermark",
    "x-tierlog-log-start-offset",
)


def _error_from(response: httpx.Response) -> TierlogError:
    try:
        doc = orjson.loads(response.content)
        code, message = ErrorCode(doc["error_code"]), str(doc["message"])
        if "retry-after" in response.headers:  # the leader's own status and wait (backpressure)
            wait = {"Retry-After": response.headers["retry-after"]}
            extra = {k: v for k, v in doc.items() if k not in ("error_code", "message")}
            return LimitError(code, message, response.status_code, wait, **extra)
        return TierlogError(code, message)
    except (ValueError, KeyError, TypeError):
        return TierlogError(
            ErrorCode.LEADER_NOT_AVAILABLE, f"leader answered HTTP {response.status_code}"
        )


# Failures that happen before a request leaves this node: the leader cannot have acted on it.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class Forwarder:
    def __init__(
        self,
        token: Callable[[], str],
        timeout_s: float,
        grace_s: float = 5.0,
        link: PeerLink = internal_transport,
    ) -> None:
        """`timeout_s` is the leader's own request timeout; `grace_s` on top lets the leader
        answer with its own timeout error rather than this node giving up first. `link`: how
        it reaches the leader (HTTP; in-process brokers in tests/harness/)."""
        self._token = token
        self._client = internal_async_client(
            token, httpx.Timeout(timeout_s + grace_s, connect=2.0), link
        )

    async def append(
        self,
        leader_url: str,
        topic: str,
        partition: int,
        frames: list[bytearray],
        acks: int,
        producer_headers: dict[str, str],
    ) -> list[AppendResult]:
        try:
            response = await self._client.post(
                f"{leader_url}/internal/topics/{topic}/partitions/{partition}/append",
                params={"acks": str(acks)},
                content=b"".join(frames),
                headers=producer_headers,
            )
        except _NOT_SENT as exc:
            raise TierlogError(
                ErrorCode.LEADER_NOT_AVAILABLE,
                f"cannot reach the leader at {leader_url}: {exc!r}; nothing was written",
            ) from None
        except httpx.HTTPError as exc:
            raise TierlogError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"the leader at {leader_url} did not answer ({exc!r}): the records may or may"
                " not have been written; retry with an idempotent producer to avoid duplicates",
            ) from None
        if response.status_code != 200:
            raise _error_from(response)
        return [AppendResult(b, e) for b, e in orjson.loads(response.content)["results"]]

    async def proxy(self, leader_url: str, request: Request) -> Response:
        # The caller was authorized here (the first hop); the leader trusts the cluster token.
        headers = {FORWARDED_HEADER: "1"}
        if "accept" in request.headers:
            headers["accept"] = request.headers["accept"]
        try:
            response = await self._client.get(
                f"{leader_url}{forwarded_path(request)}",
                params=request.query_params,
                headers=headers,
            )
        except httpx.TimeoutException as exc:  # it was reached, but did not answer in time
            raise TierlogError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"the leader at {leader_url} did not answer in time ({type(exc).__name__})",
            ) from None
        except httpx.HTTPError as exc:
            raise TierlogError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"cannot reach the leader at {leader_url}: {exc}"
            ) from None
        kept = {k: v for k, v in response.headers.items() if k.lower() in _KEEP_HEADERS}
        kept["X-Tierlog-Leader"] = leader_url
        return Response(response.content, status_code=response.status_code, headers=kept)

    def stream_lines(self, url: str, params: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        """A search's lines from the leader (cluster/search_relay.py)."""
        return leader_lines(self._client, url, params)

    async def post_json(self, url: str, body: object) -> object:
        """A cluster-internal call with a JSON body (a transaction marker for a leader):
        the leader's TierlogError is raised here as its own."""
        try:
            response = await self._client.post(url, content=orjson.dumps(body))
        except httpx.HTTPError as exc:
            raise TierlogError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"cannot reach {url}: {exc!r}"
            ) from None
        if response.status_code != 200:
            raise _error_from(response)
        return orjson.loads(response.content)

    async def get_json(self, url: str) -> object:
        response = await self._client.get(url, timeout=2.0)
        response.raise_for_status()
        return orjson.loads(response.content)

    async def close(self) -> None:
        await self._client.aclose()
