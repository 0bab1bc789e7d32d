"""Merging partitions' search events (cluster/http/search_stream.py): the cap across them,
summed progress, one partition's failure reported while the others go on, and leaving the
stream cancels every partition's search."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson

from cluster.http.search_stream import PartitionEvents, merged
from logformat.errors import ErrorCode, TierlogError

Events = dict[int, PartitionEvents]


def hit(p: int, o: int) -> dict[str, Any]:
    return {"type": "hit", "partition": p, "offset": o}


def progress(p: int, files: int) -> dict[str, Any]:
    return {"type": "progress", "partition": p, "files_scanned": files, "files_total": 4}


async def collect(searches: Events, max_hits: int, take: int | None = None) -> list[Any]:
    out = []
    stream = merged(searches, max_hits)
    async for line in stream:
        out.append(orjson.loads(line))
        if take is not None and len(out) >= take:
            await stream.aclose()
            break
    return out


def test_cap_across_partitions_cancels_the_rest() -> None:
    cancelled: list[int] = []

    def endless(p: int) -> PartitionEvents:
        async def events() -> AsyncIterator[dict[str, Any]]:
            try:
                for o in range(1_000_000):
                    yield hit(p, o)
                    await asyncio.sleep(0)
            finally:
                cancelled.append(p)

        return events

    lines = asyncio.run(collect({0: endless(0), 1: endless(1)}, max_hits=5))
    assert [x["type"] for x in lines] == ["hit"] * 5 + ["done"]
    assert lines[-1]["capped"] and lines[-1]["hits"] == 5
    assert sorted(cancelled) == [0, 1]


def test_progress_is_summed_and_a_failure_is_one_line() -> None:
    def fine() -> AsyncIterator[dict[str, Any]]:
        async def events() -> AsyncIterator[dict[str, Any]]:
            yield progress(0, 1)
            yield hit(0, 7)
            yield progress(0, 4)

        return events()

    def broken() -> AsyncIterator[dict[str, Any]]:
        async def events() -> AsyncIterator[dict[str, Any]]:
            yield progress(1, 2)
            raise TierlogError(ErrorCode.KAFKA_STORAGE_ERROR, "S3 is away")

        return events()

    lines = asyncio.run(collect({0: fine, 1: broken}, max_hits=10))
    errors = [x for x in lines if x["type"] == "error"]
    assert errors == [
        {
            "type": "error",
            "partition": 1,
            "error_code": "KAFKA_STORAGE_ERROR",
            "message": "S3 is away",
        }
    ]
    done = lines[-1]
    assert done["type"] == "done" and done["errors"] == 1 and done["hits"] == 1
    assert done["files_scanned"] == 4 + 2 and done["files_total"] == 8
    assert done["partitions_done"] == done["partitions"] == 2


def test_a_client_leaving_cancels_the_searches() -> None:
    cancelled = asyncio.Event()

    def stuck() -> AsyncIterator[dict[str, Any]]:
        async def events() -> AsyncIterator[dict[str, Any]]:
            yield progress(0, 0)
            try:
                await asyncio.sleep(3600)
            finally:
                cancelled.set()
            yield hit(0, 0)

        return events()

    async def run() -> bool:
        await collect({0: stuck}, max_hits=10, take=1)
        return cancelled.is_set()

    assert asyncio.run(run())
