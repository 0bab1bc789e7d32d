"""The NDJSON answer of a search over several partitions: each partition's events (searched
here or relayed from its leader) merged as they come, `progress` summed over partitions,
the hit cap applied across them, and a closing `done` line. Leaving the iteration (the
client disconnected, or the cap was reached) cancels every partition's search."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import orjson
from starlette.responses import StreamingResponse

from logformat.errors import ErrorCode, TierlogError

log = logging.getLogger("tierlog.search")
NDJSON = "application/x-ndjson"
PARTITIONS_AT_ONCE = 4
_SUMMED = (
    "files_scanned",
    "files_total",
    "bytes_scanned",
    "cold_bytes_scanned",
    "bytes_total",
    "table_bytes",
    "row_groups_read",
    "row_groups_total",
    "hot_records_scanned",
    "hot_records_total",
)
PartitionEvents = Callable[[], AsyncIterator[dict[str, Any]]]


def line(doc: dict[str, Any]) -> bytes:
    return orjson.dumps(doc) + b"\n"


async def _run(
    partition: int,
    events: PartitionEvents,
    queue: asyncio.Queue[tuple[int, dict[str, Any] | None]],
    slots: asyncio.Semaphore,
) -> None:
    try:
        async with slots:
            async for event in events():
                await queue.put((partition, event))
    except TierlogError as exc:
        await queue.put((partition, {"type": "error", "partition": partition, **exc.to_json()}))
    except Exception as exc:  # one partition's failure is reported, not a 500
        log.exception("search of partition %s failed", partition)
        err = {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR.value, "message": repr(exc)}
        await queue.put((partition, {"type": "error", "partition": partition, **err}))
    finally:
        await queue.put((partition, None))


def plus(doc: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """A partition's progress `doc` with an earlier part of its search (its cold files,
    searched elsewhere) added in."""
    return {**doc, **{k: int(doc.get(k, 0)) + int(earlier.get(k, 0)) for k in _SUMMED}}


class _Totals:
    def __init__(self, partitions: list[int]) -> None:
        self.latest: dict[int, dict[str, Any]] = {}
        self.partitions = partitions
        self.hits = 0
        self.errors = 0
        self.done = 0

    def progress(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"type": "progress", "hits": self.hits}
        for k in _SUMMED:
            doc[k] = sum(int(p.get(k, 0)) for p in self.latest.values())
        doc["partitions_done"], doc["partitions"] = self.done, len(self.partitions)
        return doc


async def merged(
    searches: dict[int, PartitionEvents], max_hits: int
) -> AsyncGenerator[bytes, None]:
    """NDJSON lines: `hit`s, `progress`, `error`s (one per failed partition), then `done`."""
    started = time.monotonic()
    queue: asyncio.Queue[tuple[int, dict[str, Any] | None]] = asyncio.Queue(maxsize=512)
    slots = asyncio.Semaphore(PARTITIONS_AT_ONCE)
    totals = _Totals(sorted(searches))
    tasks = [asyncio.ensure_future(_run(p, ev, queue, slots)) for p, ev in searches.items()]
    capped = False
    try:
        while totals.done < len(tasks) and not capped:
            partition, event = await queue.get()
            if event is None:
                totals.done += 1
                continue
            kind = event.get("type")
            if kind == "hit":
                totals.hits += 1
                yield line(event)
                capped = totals.hits >= max_hits
            elif kind == "progress":
                totals.latest[partition] = event
                yield line(totals.progress())
            elif kind == "error":
                totals.errors += 1
                yield line(event)
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
    done = totals.progress()
    done.update(
        type="done",
        capped=capped,
        errors=totals.errors,
        elapsed_ms=round((time.monotonic() - started) * 1000),
    )
    yield line(done)


def search_response(searches: dict[int, PartitionEvents], max_hits: int) -> StreamingResponse:
    """The NDJSON answer of a search over these partitions, streamed as it goes (never cached,
    never buffered by a proxy: progress lines must arrive while the scan runs)."""
    return StreamingResponse(
        merged(searches, max_hits),
        media_type=NDJSON,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
