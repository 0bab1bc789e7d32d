"""Every topic's description, asked of the API concurrently (the Overview and Topics pages
both need all of them)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from console.cluster_api import ClusterApi, ConsoleApiError

CONCURRENT_DESCRIBES = 16


def topic_path(name: str, *rest: str) -> str:
    return "/".join([f"/topics/{quote(name, safe='')}", *rest])


async def describe_all(api: ClusterApi, api_key: str | None) -> list[dict[str, Any]]:
    """Descriptions of the topics the key may describe, in name order. A topic deleted
    between the list and its describe is left out."""
    listing = await api.get("/topics", api_key)
    names = sorted(t["name"] for t in listing.get("topics", []))
    gate = asyncio.Semaphore(CONCURRENT_DESCRIBES)

    async def one(name: str) -> dict[str, Any] | None:
        async with gate:
            try:
                doc: dict[str, Any] = await api.get(topic_path(name), api_key)
            except ConsoleApiError as exc:
                if exc.name == "UNKNOWN_TOPIC_OR_PARTITION":
                    return None
                raise
            return doc

    found = await asyncio.gather(*(one(n) for n in names))
    return [d for d in found if d is not None]
