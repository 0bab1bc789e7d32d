"""Bulk reads: a range of offsets of many partitions at once, as Arrow tables.

For replays and exports: no group, no per-record objects. Each partition is read by its own
loop of large fetches (hot or cold is the broker's business), all partitions concurrently,
and every table goes to `sink(partition, table)` in offset order per partition.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import httpx
import pyarrow as pa
import pyarrow.compute as pc

from tierlog.client.http import ARROW_STREAM
from tierlog.client.lifecycle import ClientBase
from tierlog.client.metadata import ClusterMetadata
from tierlog.client.offsets import list_offsets, partition_get
from tierlog.client.types import TopicPartition

Sink = Callable[[TopicPartition, pa.Table], None]


class Span(NamedTuple):
    tp: TopicPartition
    start: int  # first offset to read
    end: int  # stop before this offset


class TopicReader(ClientBase):
    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        max_bytes: int = 16 * 1024 * 1024,
        request_timeout_ms: int = 60000,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
        verify: bool | str = True,
    ) -> None:
        self.max_bytes = max_bytes
        self.timeout_s = request_timeout_ms / 1000
        self._open_io(
            "tierlog-reader-io",
            bootstrap,
            timeout_s=self.timeout_s,
            transport=transport,
            api_key=api_key,
            verify=verify,
        )
        self._metadata = ClusterMetadata(self._http, max_age_ms=300000, timeout_s=self.timeout_s)

    def spans(
        self,
        topic: str,
        partitions: Sequence[int] | None = None,
        from_offset: int | None = None,
        to_offset: int | None = None,
    ) -> list[Span]:
        """What to read: from `from_offset` (default: each log's start) up to `to_offset`
        (exclusive; default: each high watermark now), clipped to what exists."""

        async def plan() -> list[Span]:
            meta = await self._metadata.topic(topic)
            ps = partitions if partitions is not None else [p.partition for p in meta.partitions]
            tps = [TopicPartition(topic, p) for p in ps]
            first = await list_offsets(self._http, self._metadata, tps, "earliest", self.timeout_s)
            last = await list_offsets(self._http, self._metadata, tps, "latest", self.timeout_s)
            out = []
            for tp in tps:
                lo, hi = first[tp] or 0, last[tp] or 0
                start = max(lo, from_offset if from_offset is not None else lo)
                end = min(hi, to_offset if to_offset is not None else hi)
                out.append(Span(tp, start, max(start, end)))
            return out

        return self._io.run(plan())

    def read(self, spans: Sequence[Span], sink: Sink) -> None:
        """Read every span, all concurrently; `sink` runs on the reader's I/O thread."""

        async def read_all() -> None:
            await asyncio.gather(*(self._read_span(span, sink) for span in spans))

        self._io.run(read_all())

    async def _read_span(self, span: Span, sink: Sink) -> None:
        offset = span.start
        while offset < span.end:
            params = {
                "offset": offset,
                "max_bytes": self.max_bytes,
                "max_records": min(1_000_000, span.end - offset),
            }
            deadline = time.monotonic() + self.timeout_s
            body = await partition_get(
                self._http, self._metadata, span.tp, "records", params, deadline, ARROW_STREAM
            )
            table = pa.ipc.open_stream(pa.py_buffer(body)).read_all()
            if table.num_rows == 0:
                return  # the log ends here (e.g. retention moved on): nothing more to read
            offsets = table.column("offset")
            last = offsets[-1].as_py()
            if last >= span.end:  # a frame may run past the end: cut it
                keep = pc.sum(pc.less(offsets, span.end)).as_py() or 0
                table = table.slice(0, keep)
            if table.num_rows:
                sink(span.tp, table)
            offset = last + 1
