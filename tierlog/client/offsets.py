"""Per-partition lookups: ListOffsets (earliest, latest = high watermark, by timestamp).

Asked of the partition's leader, retried through metadata refreshes on retriable errors.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from tierlog.client.errors import ApiError, ClientTimeoutError, error_from_response
from tierlog.client.http import ARROW_STREAM, AsyncHttp
from tierlog.client.metadata import ClusterMetadata, topic_path
from tierlog.client.types import OffsetAndTimestamp, TopicPartition


async def partition_get(
    http: AsyncHttp,
    metadata: ClusterMetadata,
    tp: TopicPartition,
    suffix: str,
    params: dict[str, Any],
    deadline: float,
    accept: str = "application/json",
) -> Any:
    """GET {leader}/topics/{t}/partitions/{p}/{suffix}: JSON doc (or raw bytes for Arrow)."""
    delay = 0.05
    while True:
        url = f"{metadata.leader_url(tp)}{topic_path(tp.topic)}/partitions/{tp.partition}/{suffix}"
        try:
            if accept == ARROW_STREAM:
                response = await http.request("GET", url, params=params, headers={"accept": accept})
                if response.status_code >= 400:
                    raise error_from_response(response)
                metadata.note_leader(tp, response.headers.get("x-tierlog-leader"))
                return response.content
            return await http.call("GET", url, params=params)
        except ApiError as exc:
            if exc.stale_metadata:
                metadata.invalidate(tp)
            if not (exc.retriable or exc.stale_metadata) or time.monotonic() + delay > deadline:
                raise
            if exc.stale_metadata:
                try:
                    await metadata.topic(tp.topic, force=True)
                except ApiError as refresh_error:
                    if refresh_error.name == "UNKNOWN_TOPIC_OR_PARTITION":
                        raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def list_offset(
    http: AsyncHttp, metadata: ClusterMetadata, tp: TopicPartition, at: str | int, deadline: float
) -> int | None:
    """The offset for `at` ("earliest", "latest" or a timestamp in ms); None when every
    record is older than the timestamp."""
    doc = await partition_get(http, metadata, tp, "offsets", {"at": str(at)}, deadline)
    offset = doc.get("offset")
    return int(offset) if offset is not None else None


async def list_offsets(
    http: AsyncHttp,
    metadata: ClusterMetadata,
    partitions: Iterable[TopicPartition],
    at: str | int,
    timeout_s: float,
) -> dict[TopicPartition, int | None]:
    deadline = time.monotonic() + timeout_s
    tps = list(partitions)
    found = await asyncio.gather(*(list_offset(http, metadata, tp, at, deadline) for tp in tps))
    return dict(zip(tps, found, strict=True))


async def offset_for_time(
    http: AsyncHttp, metadata: ClusterMetadata, tp: TopicPartition, ts: int, deadline: float
) -> OffsetAndTimestamp | None:
    """Kafka's offsetsForTimes for one partition: the first record at or after `ts`, with
    that record's own timestamp."""
    offset = await list_offset(http, metadata, tp, int(ts), deadline)
    if offset is None:
        return None
    params = {"offset": offset, "max_records": 1}
    body = await partition_get(http, metadata, tp, "records", params, deadline, ARROW_STREAM)
    table = pa.ipc.open_stream(pa.py_buffer(body)).read_all()
    if table.num_rows == 0:
        return OffsetAndTimestamp(offset, int(ts))
    stamp = table.column("timestamp").cast(pa.int64())[0].as_py()
    return OffsetAndTimestamp(offset, int(stamp))


def check_deadline(deadline: float, what: str) -> None:
    if time.monotonic() >= deadline:
        raise ClientTimeoutError(f"{what} timed out")
