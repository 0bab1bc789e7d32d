"""The public fetch request and response, shared by brokers and fetch nodes.

One encoder for both tiers and both kinds of node, so a record reads back the same bytes
whether a broker's hot log, a broker's cold read or a fetch node served it (docs/design.md §5:
"hot or cold is invisible to the caller").
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import orjson
import pyarrow as pa
from starlette.requests import Request
from starlette.responses import Response

from cluster.http.responses import JSONResponse, query_int
from cluster.read_contract import FetchResult, FrameCrc
from logformat import records
from logformat.errors import ErrorCode, TierlogError
from logformat.records import VALUE_FORMATS, ValueFormat
from logformat.schema import CONSUMER_SCHEMA

ARROW_STREAM = "application/vnd.apache.arrow.stream"
MAX_FETCH_BYTES = 64 * 1024 * 1024
MAX_OFFSET = 2**63 - 1
# A fetch node asks an in-sync follower to serve a hot read itself (Kafka's KIP-392 follower
# fetching); with the cluster credential only, so public clients always reach the leader.
REPLICA_READ_HEADER = "x-tierlog-replica-read"
OFFLOAD_BYTES = 1 << 20  # answers bigger than this are encoded off the event loop
# Arrow answers list the frames they were read from in the stream's schema metadata.
FRAMES_METADATA_KEY = b"tierlog.frames"


class FetchParams(NamedTuple):
    offset: int | None  # None: the log start (across tiers)
    max_records: int
    max_bytes: int
    wait_ms: int
    value_format: ValueFormat


def fetch_params(request: Request, typed: bool = False) -> FetchParams:
    """`typed`: this node adds typed columns on request (fetch nodes: fetch/typed_answers.py);
    elsewhere `columns` is refused, not ignored."""
    if not typed and "columns" in request.query_params:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            "columns (typed lake columns in Arrow answers) is served by fetch nodes: "
            "send the fetch to a fetch node",
        )
    raw = request.query_params.get("offset")
    offset = None if raw in (None, "") else query_int(request, "offset", None, 0, MAX_OFFSET)
    value_format = request.query_params.get("value_format", "auto")
    if value_format not in VALUE_FORMATS:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            f"value_format must be auto, base64 or string; got {value_format!r}",
        )
    return FetchParams(
        offset,
        query_int(request, "max_records", 500, 1, 1_000_000),
        query_int(request, "max_bytes", 1024 * 1024, 1, MAX_FETCH_BYTES),
        query_int(request, "wait_ms", 0, 0, 30_000),
        value_format,
    )


def wants_arrow(request: Request) -> bool:
    return ARROW_STREAM in request.headers.get("accept", "")


def frames_json(frames: tuple[FrameCrc, ...]) -> list[dict[str, int]]:
    """The frames a hot answer was read from and the CRC-32C each was verified against (the
    same on every replica: a client can compare two reads of the same offsets)."""
    return [
        {"base_offset": f.base_offset, "last_offset": f.last_offset, "crc32c": f.crc}
        for f in frames
    ]


def arrow_stream(batch: pa.RecordBatch, frames: tuple[FrameCrc, ...] = ()) -> memoryview:
    """The batch as an Arrow IPC stream; a view of Arrow's buffer, not a copy of it (a
    replay's responses are megabytes each)."""
    sink = pa.BufferOutputStream()
    # A batch with more columns (a fetch node's typed columns, fetch/typed_answers.py) keeps
    # its own schema; every other answer is CONSUMER_SCHEMA, exactly.
    schema = CONSUMER_SCHEMA if batch.num_columns == len(CONSUMER_SCHEMA) else batch.schema
    if frames:
        schema = schema.with_metadata({FRAMES_METADATA_KEY: orjson.dumps(frames_json(frames))})
    with pa.ipc.new_stream(sink, schema) as writer:
        if batch.num_rows:
            writer.write_batch(batch)
    return memoryview(sink.getvalue())


class _LastEncoded:
    """The last batch encoded, per format. The long polls one produce wakes share one read
    (ingest/tiered/fetch_reader.py), so they share its encoding too: one render, not a thousand."""

    def __init__(self) -> None:
        self.batch: pa.RecordBatch | None = None
        self.encoded: dict[str, Any] = {}

    def get(self, batch: pa.RecordBatch, fmt: str) -> Any:
        return self.encoded.get(fmt) if batch is self.batch else None

    def put(self, batch: pa.RecordBatch, fmt: str, encoded: Any, big: bool) -> None:
        if big:  # a replay's page is not worth keeping alive (JSON rows are Python objects)
            return
        if batch is not self.batch:
            self.batch, self.encoded = batch, {}
        self.encoded[fmt] = encoded

    async def encode(
        self, batch: pa.RecordBatch, fmt: str, big: bool, encode: Callable[[], Any]
    ) -> Any:
        """The batch in `fmt`, encoded once per batch (off the event loop when big)."""
        found = self.get(batch, fmt)
        if found is None:
            found = await asyncio.to_thread(encode) if big else encode()
            self.put(batch, fmt, found, big)
        return found


_LAST = _LastEncoded()


async def fetch_response(
    request: Request, result: FetchResult, value_format: ValueFormat, leader_url: str | None
) -> Response:
    """The fetch answer: an Arrow stream (offsets in the headers) or the JSON document.
    A big answer is encoded on a worker thread, so the event loop (produce, other fetches)
    is never held for the milliseconds a replay-sized response takes."""
    headers = {
        "X-Tierlog-Next-Offset": str(result.next_offset),
        "X-Tierlog-High-Watermark": str(result.high_watermark),
        "X-Tierlog-Log-Start-Offset": str(result.log_start_offset),
    }
    if leader_url:
        headers["X-Tierlog-Leader"] = leader_url
    big = result.batch.nbytes >= OFFLOAD_BYTES
    batch = result.batch
    if wants_arrow(request):
        # The frames come from the same read as the batch: the batch alone is the key.
        arrow = functools.partial(arrow_stream, batch, result.frames)
        body = await _LAST.encode(batch, ARROW_STREAM, big, arrow)
        return Response(body, media_type=ARROW_STREAM, headers=headers)
    render = functools.partial(records.render_json_records, batch, value_format)
    rows = await _LAST.encode(batch, value_format, big, render)
    return JSONResponse(
        {
            "records": rows,
            "next_offset": result.next_offset,
            "high_watermark": result.high_watermark,
            "log_start_offset": result.log_start_offset,
            "frames": frames_json(result.frames),
        },
        headers=headers,
    )
