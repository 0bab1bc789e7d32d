"""Topics as the API describes them: every one, asked concurrently (the Overview and Topics
pages need all of them), and the figures the pages show of one."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from starlette.requests import Request

from console.cluster_api import ClusterApi, ConsoleApiError

CONCURRENT_DESCRIBES = 16


def topic_path(name: str, *rest: str) -> str:
    return "/".join([f"/topics/{quote(name, safe='')}", *rest])


def topic_names(listing: dict[str, Any]) -> list[str]:
    """The names in GET /topics (the API's TopicList), sorted."""
    return sorted(t["name"] for t in listing.get("topics", []))


async def describe_all(api: ClusterApi, api_key: str | None) -> list[dict[str, Any]]:
    """Descriptions of the topics the key may describe, in name order. A topic deleted
    between the list and its describe is left out."""
    names = topic_names(await api.get("/topics", api_key))
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


def _total(values: list[Any]) -> Any:
    """A sum, or None when any part is unknown (a leader that could not be asked)."""
    return None if any(v is None for v in values) else sum(values)


def summary(topic: dict[str, Any]) -> dict[str, Any]:
    """A topic's totals over its partitions. `records` is the offsets it holds (high watermark
    minus log start, both tiers): a key-compacted topic holds fewer records than that."""
    parts = topic["partitions"]
    records = [
        None
        if p["high_watermark"] is None or p["log_start_offset"] is None
        else max(0, p["high_watermark"] - p["log_start_offset"])
        for p in parts
    ]
    seconds = [p.get("tiering_lag_seconds") for p in parts]
    return {
        "name": topic["name"],
        "partitions": len(parts),
        "replication_factor": topic["replication_factor"],
        "records": _total(records),
        "hot_bytes": _total([p.get("hot_bytes") for p in parts]),
        "cold_bytes": _total([p.get("cold_bytes") for p in parts]),
        "retention_ms": topic["configs"].get("retention.ms"),
        "retention_bytes": topic["configs"].get("retention.bytes"),
        "tiering": topic["configs"].get("remote.storage.enable") == "true",
        "lag_records": _total([p.get("tiering_lag") for p in parts]),
        # Of those, the records waiting for their segment to roll (not counted in the bytes
        # and seconds, which are sealed segments' as Kafka's RemoteCopyLag counts them).
        "lag_open_records": _total([p.get("tiering_lag_open_records", 0) for p in parts]),
        "lag_bytes": _total([p.get("tiering_lag_bytes") for p in parts]),
        "lag_seconds": None if any(s is None for s in seconds) else max(seconds, default=0),
    }


def topic_context(request: Request, topic: dict[str, Any]) -> dict[str, Any]:
    return {
        "active": "topics",
        "topic": topic,
        "summary": summary(topic),
        "done": request.query_params.get("done"),
        "error": None,
        "notice": None,
    }
