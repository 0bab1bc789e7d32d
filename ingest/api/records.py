"""Produce, fetch and list-offsets for one topic's partitions."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ingest import metrics
from ingest.api.http import JSONResponse, path_partition, query_int, read_body
from ingest.fetch_reader import fetch
from ingest.partition_state import AppendResult, PartitionState
from ingest.produce import ProducePlan, json_offsets, plan_arrow, plan_json, producer_fields
from ingest.replication_wire import FORWARDED_HEADER
from logformat import records
from logformat.errors import ErrorCode, TierlogError
from logformat.records import VALUE_FORMATS
from logformat.schema import CONSUMER_SCHEMA

if TYPE_CHECKING:
    from ingest.broker import Broker
    from ingest.metadata_cache import TopicView

ARROW_STREAM = "application/vnd.apache.arrow.stream"
JSON_TYPES = ("application/json", "", "application/x-www-form-urlencoded", "text/plain")
ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
MAX_FETCH_BYTES = 64 * 1024 * 1024


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _wants_arrow(request: Request) -> bool:
    return ARROW_STREAM in request.headers.get("accept", "")


async def produce(request: Request) -> Response:
    broker: Broker = request.app.state.broker
    topic = request.path_params["topic"]
    acks_raw = request.query_params.get("acks", "all")
    if acks_raw not in ACKS:
        raise TierlogError(ErrorCode.INVALID_REQUEST, f"acks must be all, 1 or 0; got {acks_raw!r}")
    acks = ACKS[acks_raw]
    media = _media_type(request)
    if media != ARROW_STREAM and media not in JSON_TYPES:
        raise TierlogError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            f"produce takes application/json or {ARROW_STREAM}, not {media!r}",
        )
    view = broker.topic_view(topic)
    body = await read_body(request, broker.config.max_request_bytes)
    now_ms = int(time.time() * 1000)
    planner = plan_arrow if media == ARROW_STREAM else plan_json
    producer = producer_fields(request.headers)
    # Everything is validated and framed before anything is written: bad input writes nothing.
    plan = planner(
        body, topic, len(view.partitions), view.config, broker.sticky_for(topic), now_ms, producer
    )
    forwarded = FORWARDED_HEADER in request.headers
    writes = [_append(broker, view, a.partition, a.frames, acks, forwarded) for a in plan.appends]
    if acks == 0:
        task = asyncio.gather(*writes, return_exceptions=True)  # errors dropped, as acks=0 means
        broker.background(task)
        return JSONResponse({"offsets": None, "acks": 0})
    gathered = await asyncio.gather(*writes, return_exceptions=True)
    for o in gathered:
        if isinstance(o, BaseException) and not isinstance(o, TierlogError):
            raise o
    outcomes = cast(list[list[AppendResult] | TierlogError], gathered)
    errors = [o for o in outcomes if isinstance(o, TierlogError)]
    if errors and len(errors) == len(outcomes):
        raise errors[0]  # nothing was written: answer with the (first) partition's error
    _count(topic, plan, outcomes)
    headers = _leader_header(broker, view, plan.appends[0].partition)
    if media == ARROW_STREAM:
        return JSONResponse(_arrow_reply(plan, outcomes), headers=headers)
    bases: dict[int, int | TierlogError] = {
        a.partition: (o if isinstance(o, TierlogError) else o[0].base_offset)
        for a, o in zip(plan.appends, outcomes, strict=True)
    }
    return JSONResponse({"offsets": json_offsets(plan, bases)}, headers=headers)


async def _append(
    broker: Broker,
    view: TopicView,
    partition: int,
    frames: list[bytearray],
    acks: int,
    forwarded: bool,
) -> list[AppendResult]:
    timeout_s = broker.config.request_timeout_ms / 1000
    state = broker.leader_state(view.info.name, partition)
    if state is not None:
        return await state.append(frames, acks, view.config.min_insync_replicas, timeout_s)
    if forwarded:  # one hop only: the sender's metadata is stale, it will retry
        raise TierlogError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"broker {broker.config.broker_id} does not lead {view.info.name}-{partition}",
        )
    url = broker.leader_url(view, partition)
    return await broker.forwarder.append(url, view.info.name, partition, frames, acks, {})


def _leader_header(broker: Broker, view: TopicView, partition: int) -> dict[str, str]:
    leader = view.partitions[partition].leader
    url = broker.cache.broker_url(leader) if leader is not None else None
    return {"X-Tierlog-Leader": url} if url else {}


def _arrow_reply(plan: ProducePlan, outcomes: list[Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for a, o in zip(plan.appends, outcomes, strict=True):
        if isinstance(o, TierlogError):
            parts.append({"partition": a.partition, "record_count": a.record_count, **o.to_json()})
        else:
            parts.append(
                {
                    "partition": a.partition,
                    "base_offset": o[0].base_offset,
                    "last_offset": o[-1].last_offset,
                    "record_count": a.record_count,
                }
            )
    return {"record_count": plan.record_count, "partitions": parts}


def _count(topic: str, plan: ProducePlan, outcomes: list[Any]) -> None:
    ok = [
        a for a, o in zip(plan.appends, outcomes, strict=True) if not isinstance(o, BaseException)
    ]
    metrics.PRODUCED_RECORDS.labels(topic).inc(sum(a.record_count for a in ok))
    metrics.PRODUCED_BYTES.labels(topic).inc(sum(len(f) for a in ok for f in a.frames))


async def fetch_records(request: Request) -> Response:
    broker: Broker = request.app.state.broker
    topic = request.path_params["topic"]
    partition = path_partition(request)
    state = await _local_leader(broker, request, topic, partition)
    if not isinstance(state, PartitionState):
        return state
    offset = query_int(request, "offset", state.log.log_start_offset, 0, 2**63 - 1)
    max_records = query_int(request, "max_records", 500, 1, 1_000_000)
    max_bytes = query_int(request, "max_bytes", 1024 * 1024, 1, MAX_FETCH_BYTES)
    wait_ms = query_int(request, "wait_ms", 0, 0, 30_000)
    value_format = request.query_params.get("value_format", "auto")
    if value_format not in VALUE_FORMATS:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            f"value_format must be auto, base64 or string; got {value_format!r}",
        )
    try:
        result = await fetch(state, offset, max_records, max_bytes, wait_ms)
    except TierlogError as exc:
        if exc.code is ErrorCode.OFFSET_OUT_OF_RANGE and offset < state.log.log_start_offset:
            cold = await broker.remote_log.out_of_range(state, offset)
            if cold is not None:  # say where the offset lives (cross-tier fetch comes later)
                raise cold from None
        raise
    metrics.FETCHED_RECORDS.labels(topic).inc(result.batch.num_rows)
    headers = {
        "X-Tierlog-Leader": broker.config.advertised_url,
        "X-Tierlog-Next-Offset": str(result.next_offset),
        "X-Tierlog-High-Watermark": str(result.high_watermark),
        "X-Tierlog-Log-Start-Offset": str(result.log_start_offset),
    }
    if _wants_arrow(request):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, CONSUMER_SCHEMA) as writer:
            if result.batch.num_rows:
                writer.write_batch(result.batch)
        return Response(sink.getvalue().to_pybytes(), media_type=ARROW_STREAM, headers=headers)
    return JSONResponse(
        {
            "records": records.render_json_records(result.batch, value_format),
            "next_offset": result.next_offset,
            "high_watermark": result.high_watermark,
            "log_start_offset": result.log_start_offset,
        },
        headers=headers,
    )


async def _local_leader(
    broker: Broker, request: Request, topic: str, partition: int
) -> PartitionState | Response:
    """This broker's state if it leads the partition, else the leader's proxied answer."""
    view = broker.topic_view(topic)
    broker.check_partition(view, partition)
    state = broker.leader_state(topic, partition)
    if state is not None:
        return state
    if FORWARDED_HEADER in request.headers:
        raise TierlogError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"broker {broker.config.broker_id} does not lead {topic}-{partition}",
        )
    return await broker.forwarder.proxy(broker.leader_url(view, partition), request)


async def list_offsets(request: Request) -> Response:
    """?at=earliest|latest|<timestamp ms>: Kafka's ListOffsets for one partition."""
    broker: Broker = request.app.state.broker
    partition = path_partition(request)
    state = await _local_leader(broker, request, request.path_params["topic"], partition)
    if not isinstance(state, PartitionState):
        return state
    at = request.query_params.get("at", "latest")
    body: dict[str, object] = {"partition": partition, "at": at}
    if at == "earliest":
        body["offset"] = state.log.log_start_offset
    elif at == "latest":
        body["offset"] = state.high_watermark
    else:
        try:
            ts = int(at)
        except ValueError:
            raise TierlogError(
                ErrorCode.INVALID_REQUEST,
                f"at must be earliest, latest or a timestamp in ms; got {at!r}",
            ) from None
        if ts < 0:
            raise TierlogError(ErrorCode.INVALID_TIMESTAMP, f"timestamp must be ≥ 0, got {ts}")
        offset = state.log.offset_for_timestamp(ts)
        # Kafka answers "no such offset" when every record is older than the timestamp.
        body["offset"] = offset if offset is not None and offset < state.high_watermark else None
    body["log_start_offset"] = state.log.log_start_offset
    body["high_watermark"] = state.high_watermark
    return JSONResponse(body, headers={"X-Tierlog-Leader": broker.config.advertised_url})


routes = [
    Route("/topics/{topic}/records", produce, methods=["POST"]),
    Route("/topics/{topic}/partitions/{partition}/records", fetch_records, methods=["GET"]),
    Route("/topics/{topic}/partitions/{partition}/offsets", list_offsets, methods=["GET"]),
]
