"""Fetching records: long-polling GETs per partition on the I/O loop, Arrow answers kept.

A fetch asks the partition's leader for records from an offset, as an Arrow IPC stream, and
long-polls up to `wait_ms` when caught up. The consumer's thread sends fetches without waiting
(send) and picks up answers when it likes (arrived, wait), so fetches run while the
application works: the prefetch Kafka's fetcher does. Answers carry the offset and epoch they
were asked for, so the consumer drops answers made stale by a seek or a rebalance. Answers
stay Arrow tables: records become Python objects only in poll(), and only the fields read.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from dataclasses import KW_ONLY, dataclass, field
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from tierlog.client.consumer_records import RecordRows
from tierlog.client.errors import ApiError, error_from_response
from tierlog.client.http import ARROW_STREAM, AsyncHttp
from tierlog.client.iothread import IOThread
from tierlog.client.metadata import ClusterMetadata, topic_path
from tierlog.client.types import TopicPartition


class FetchRequest(NamedTuple):
    tp: TopicPartition
    offset: int
    epoch: int


class FetchedRecords(NamedTuple):
    request: FetchRequest
    rows: RecordRows | None  # None: no records (an error, or nothing new)
    next_offset: int
    high_watermark: int | None
    log_start_offset: int | None
    error: ApiError | None = None


def _header_int(value: str | None) -> int | None:
    return int(value) if value is not None and value.lstrip("-").isdigit() else None


def below_high_watermark(table: pa.Table, high_watermark: int | None) -> pa.Table:
    """CONSUMER_SCHEMA rows below the high watermark (the broker never sends others; a
    client that trusts nothing checks anyway). Offsets ascend, so it is a prefix."""
    if high_watermark is None or table.num_rows == 0:
        return table
    offsets = table.column("offset")
    if offsets[-1].as_py() < high_watermark:
        return table
    keep = pc.sum(pc.less(offsets, high_watermark)).as_py() or 0
    return table.slice(0, keep)


@dataclass(eq=False)
class Fetcher:
    http: AsyncHttp
    metadata: ClusterMetadata
    io: IOThread
    _: KW_ONLY
    max_wait_ms: int
    max_bytes: int
    max_records: int
    max_concurrent: int
    timeout_s: float
    # Partitions with a fetch sent and its answer not yet taken (the consumer's thread).
    _pending: set[TopicPartition] = field(default_factory=set, init=False)
    # Answers, appended on the I/O loop and taken on the consumer's thread (deque is atomic).
    _arrived: deque[FetchedRecords] = field(default_factory=deque, init=False)
    _wakeup: threading.Event = field(default_factory=threading.Event, init=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)  # the loop's

    def in_flight(self) -> set[TopicPartition]:
        return set(self._pending)

    def room(self) -> int:
        return self.max_concurrent - len(self._pending)

    def send(self, requests: list[FetchRequest], wait_s: float) -> None:
        """Start fetches for `requests` (partitions without one in flight); returns at once."""
        todo = [r for r in requests if r.tp not in self._pending][: max(0, self.room())]
        if not todo:
            return
        self._pending.update(r.tp for r in todo)
        wait_ms = min(self.max_wait_ms, int(wait_s * 1000))
        self.io.call_soon(self._start, todo, wait_ms)

    def arrived(self) -> list[FetchedRecords]:
        """Every answer that has come in since the last call (never waits)."""
        out: list[FetchedRecords] = []
        while self._arrived:
            result = self._arrived.popleft()
            self._pending.discard(result.request.tp)
            out.append(result)
        return out

    def wait(self, timeout_s: float) -> None:
        """Until an answer comes in (or one is waiting already), or `timeout_s` passes."""
        self._wakeup.clear()
        if not self._arrived:
            self._wakeup.wait(timeout_s)

    def _start(self, requests: list[FetchRequest], wait_ms: int) -> None:
        for req in requests:
            task = asyncio.ensure_future(self._run(req, wait_ms))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, req: FetchRequest, wait_ms: int) -> None:
        try:
            result = await self._fetch(req, wait_ms)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # never leave the partition pending for ever
            error = ApiError("UNKNOWN_SERVER_ERROR", f"fetch of {req.tp} failed: {exc!r}")
            result = FetchedRecords(req, None, req.offset, None, None, error)
        self._arrived.append(result)
        self._wakeup.set()

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
            kept = below_high_watermark(table, hw)
            nxt = _header_int(response.headers.get("x-tierlog-next-offset"))
            if kept.num_rows:
                last = kept.column("offset")[-1].as_py() + 1
                # The broker's next offset skips compaction gaps, unless rows were dropped.
                nxt = last if nxt is None or kept.num_rows < table.num_rows else max(nxt, last)
            rows = RecordRows(tp.topic, tp.partition, kept) if kept.num_rows else None
            return FetchedRecords(req, rows, nxt if nxt is not None else req.offset, hw, start)
        except ApiError as exc:
            if exc.stale_metadata:
                self.metadata.invalidate(tp)
                with contextlib.suppress(Exception):
                    await self.metadata.topic(tp.topic, force=True)
            return FetchedRecords(req, None, req.offset, None, None, exc)
        except (pa.ArrowException, OSError, ValueError, KeyError) as exc:
            error = ApiError("CORRUPT_MESSAGE", f"unreadable fetch answer for {tp}: {exc}")
            return FetchedRecords(req, None, req.offset, None, None, error)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
