"""Fetching records: long-polling GETs per partition on the I/O loop, Arrow answers decoded.

A fetch asks the partition's leader for records from a position, as an Arrow IPC stream, and
long-polls up to `wait_ms` when caught up. Requests stay in flight across poll() calls (a
prefetch, as Kafka's fetcher does); answers carry the position and epoch they were asked
for, so the consumer drops answers made stale by a seek or a rebalance.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from dataclasses import KW_ONLY, dataclass, field
from typing import NamedTuple

import pyarrow as pa

from tierlog.client.errors import ApiError, error_from_response
from tierlog.client.http import ARROW_STREAM, AsyncHttp
from tierlog.client.metadata import ClusterMetadata, topic_path
from tierlog.client.types import ConsumerRecord, Header, TopicPartition


class FetchRequest(NamedTuple):
    tp: TopicPartition
    offset: int
    epoch: int


class FetchedRecords(NamedTuple):
    request: FetchRequest
    records: list[ConsumerRecord]
    next_offset: int
    high_watermark: int | None
    log_start_offset: int | None
    error: ApiError | None = None


def _header_int(value: str | None) -> int | None:
    return int(value) if value is not None and value.lstrip("-").isdigit() else None


def decode_records(
    tp: TopicPartition, table: pa.Table, high_watermark: int | None
) -> list[ConsumerRecord]:
    """CONSUMER_SCHEMA rows as ConsumerRecords, dropping any at or above the high watermark
    (the broker never sends those; a client that trusts nothing checks anyway)."""
    if table.num_rows == 0:
        return []
    offsets = table.column("offset").to_pylist()
    n = len(offsets)
    if high_watermark is not None:
        n = bisect.bisect_left(offsets, high_watermark)
        if n == 0:
            return []
        table = table.slice(0, n)
    stamps = table.column("timestamp").cast(pa.int64()).to_pylist()
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    raw_headers = table.column("headers").to_pylist()
    topic, p = tp
    out: list[ConsumerRecord] = []
    for i in range(n):
        hs = raw_headers[i]
        headers: list[Header] = [(h["key"], h["value"]) for h in hs] if hs else []
        out.append(ConsumerRecord(topic, p, offsets[i], stamps[i], keys[i], values[i], headers))
    return out


@dataclass(eq=False)
class Fetcher:
    http: AsyncHttp
    metadata: ClusterMetadata
    _: KW_ONLY
    max_wait_ms: int
    max_bytes: int
    max_records: int
    max_concurrent: int
    timeout_s: float
    _inflight: dict[TopicPartition, asyncio.Task[FetchedRecords]] = field(
        default_factory=dict, init=False
    )

    def in_flight(self) -> set[TopicPartition]:
        return set(self._inflight)

    async def round(self, requests: list[FetchRequest], wait_s: float) -> list[FetchedRecords]:
        """Start fetches for `requests` (partitions without one in flight), then wait up to
        `wait_s` for any answer; return every answer that has arrived."""
        for req in requests:
            if len(self._inflight) >= self.max_concurrent:
                break
            if req.tp not in self._inflight:
                wait_ms = min(self.max_wait_ms, int(wait_s * 1000))
                self._inflight[req.tp] = asyncio.ensure_future(self._fetch(req, wait_ms))
        tasks = list(self._inflight.values())
        if tasks and not any(t.done() for t in tasks) and wait_s > 0:
            await asyncio.wait(tasks, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        results: list[FetchedRecords] = []
        for tp, task in list(self._inflight.items()):
            if task.done():
                del self._inflight[tp]
                results.append(task.result())
        return results

    async def _fetch(self, req: FetchRequest, wait_ms: int) -> FetchedRecords:
        tp = req.tp
        url = f"{self.metadata.leader_url(tp)}{topic_path(tp.topic)}/partitions/{tp.partition}"
        try:
            response = await self.http.request(
                "GET",
                url + "/records",
                params={
                    "offset": req.offset,
                    "max_records": self.max_records,
                    "max_bytes": self.max_bytes,
                    "wait_ms": wait_ms,
                },
                headers={"accept": ARROW_STREAM},
                timeout_s=self.timeout_s + wait_ms / 1000,
            )
            self.metadata.note_leader(tp, response.headers.get("x-tierlog-leader"))
            if response.status_code >= 400:
                raise error_from_response(response)
            hw = _header_int(response.headers.get("x-tierlog-high-watermark"))
            start = _header_int(response.headers.get("x-tierlog-log-start-offset"))
            table = pa.ipc.open_stream(pa.py_buffer(response.content)).read_all()
            records = decode_records(tp, table, hw)
            nxt = _header_int(response.headers.get("x-tierlog-next-offset"))
            if records:
                last = records[-1].offset + 1
                # The broker's next offset skips compaction gaps, unless rows were dropped.
                nxt = last if nxt is None or len(records) < table.num_rows else max(nxt, last)
            return FetchedRecords(req, records, nxt if nxt is not None else req.offset, hw, start)
        except ApiError as exc:
            if exc.stale_metadata:
                self.metadata.invalidate(tp)
                with contextlib.suppress(Exception):
                    await self.metadata.topic(tp.topic, force=True)
            return FetchedRecords(req, [], req.offset, None, None, exc)
        except (pa.ArrowException, OSError, ValueError) as exc:
            error = ApiError("CORRUPT_MESSAGE", f"unreadable fetch answer for {tp}: {exc}")
            return FetchedRecords(req, [], req.offset, None, None, error)

    async def close(self) -> None:
        for task in self._inflight.values():
            task.cancel()
        await asyncio.gather(*self._inflight.values(), return_exceptions=True)
        self._inflight.clear()
