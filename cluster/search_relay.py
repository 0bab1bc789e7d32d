"""A partition's search asked of its leader, one hop (brokers for the partitions they do not
lead, fetch nodes for the hot part): the leader's NDJSON lines as they come. The request
carries the cluster credential (the client was authorized at the first hop) and the
forwarded header (the leader never forwards it again); leaving the iteration closes the
connection, which cancels the leader's scan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from cluster.internal_http import FORWARDED_HEADER
from logformat.errors import ErrorCode, TierlogError


async def leader_lines(
    client: httpx.AsyncClient, url: str, params: dict[str, str]
) -> AsyncIterator[dict[str, Any]]:
    try:
        async with client.stream(
            "GET", url, params=params, headers={FORWARDED_HEADER: "1"}
        ) as response:
            if response.status_code != 200:
                await response.aread()
                raise _refusal(response)
            async for text in response.aiter_lines():
                if text:
                    yield orjson.loads(text)
    except httpx.HTTPError as exc:
        raise TierlogError(
            ErrorCode.LEADER_NOT_AVAILABLE, f"the search at {url} failed: {exc!r}"
        ) from None


def _refusal(response: httpx.Response) -> TierlogError:
    try:
        doc = orjson.loads(response.content)
        return TierlogError(ErrorCode(doc["error_code"]), str(doc["message"]))
    except (ValueError, KeyError, TypeError):
        return TierlogError(
            ErrorCode.LEADER_NOT_AVAILABLE, f"the leader answered HTTP {response.status_code}"
        )
