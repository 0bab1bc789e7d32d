"""Produce, fetch and list-offsets for one topic's partitions."""

from __future__ import annotations

import asyncio
import functools
import hmac
import time
from typing import TYPE_CHECKING, Any, cast

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cluster.http import auth
from cluster.http.fetch_response import (
    ARROW_STREAM,
    OFFLOAD_BYTES,
    REPLICA_READ_HEADER,
    fetch_params,
    fetch_response,
)
from cluster.http.limits import DECODED_SCOPE_KEY
from cluster.http.responses import JSONResponse, path_partition, read_body, timestamp_param
from cluster.internal_http import CLUSTER_TOKEN_HEADER, FORWARDED_HEADER
from ingest.produce import ProducePlan, json_offsets, plan_arrow, plan_json, producer_fields
from ingest.service.expansion import expansion_limits
from ingest.service.fetch_rules import capped_max_bytes
from ingest.service.partitions import AppendResult, Partition, Role, log_start
from logformat.errors import ErrorCode, TierlogError
from logformat.expansion import measure_arrow

if TYPE_CHECKING:
    from cluster.metadata_cache import TopicView
    from ingest.service.services import Services

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def produce(request: Request) -> Response:
    services = _services(request)
    produce = services.produce
    topic = request.path_params["topic"]
    acks_raw = request.query_params.get("acks", "all")
    if acks_raw not in ACKS:
        raise TierlogError(ErrorCode.INVALID_REQUEST, f"acks must be all, 1 or 0; got {acks_raw!r}")
    acks = ACKS[acks_raw]
    # Authorized before anything else: a denied caller learns nothing of the topic.
    auth.require(request, "topic", topic, "write")
    media = _media_type(request)
    if media not in (ARROW_STREAM, "application/json"):  # also refused by api/cross_site.py
        raise TierlogError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            f"produce takes application/json or {ARROW_STREAM}, not {media!r}",
        )
    view = await produce.topic(auth.principal(request), topic)
    body = await read_body(request, services.config.max_request_bytes)
    # Everything is validated and framed before anything is written: bad input writes nothing.
    plan = await _plan(request, services, view, media, body)
    await produce.check_plan_schema_ids(view, plan)
    forwarded = FORWARDED_HEADER in request.headers
    writes = [
        produce.append(view, a.partition, a.frames, acks, a.record_count, forwarded)
        for a in plan.appends
    ]
    if acks == 0:
        task = asyncio.gather(*writes, return_exceptions=True)  # errors dropped, as acks=0 means
        produce.background(task)
        return JSONResponse({"offsets": None, "acks": 0})
    gathered = await asyncio.gather(*writes, return_exceptions=True)
    for o in gathered:
        if isinstance(o, BaseException) and not isinstance(o, TierlogError):
            raise o
    outcomes = cast(list[list[AppendResult] | TierlogError], gathered)
    errors = [o for o in outcomes if isinstance(o, TierlogError)]
    if errors and len(errors) == len(outcomes):
        raise errors[0]  # nothing was written: answer with the (first) partition's error
    url = produce.leader_url(view, plan.appends[0].partition)
    headers = {"X-Tierlog-Leader": url} if url else {}
    if media == ARROW_STREAM:
        return JSONResponse(_arrow_reply(plan, outcomes), headers=headers)
    bases: dict[int, int | TierlogError] = {
        a.partition: (o if isinstance(o, TierlogError) else o[0].base_offset)
        for a, o in zip(plan.appends, outcomes, strict=True)
    }
    return JSONResponse({"offsets": json_offsets(plan, bases)}, headers=headers)


async def _plan(
    request: Request, services: Services, view: TopicView, media: str, body: bytes
) -> ProducePlan:
    """The request's frames. The body is measured against the expansion limits before it
    is decoded (an Arrow stream's decoded size is held in the in-flight budget and counted
    against the quota like body bytes); big bodies are decoded off the event loop."""
    cfg = services.config
    limits = expansion_limits(cfg)
    topic = view.info.name
    sticky, now_ms = services.produce.sticky_for(topic), int(time.time() * 1000)
    args = (body, topic, len(view.partitions), view.config, sticky, now_ms)
    producer = producer_fields(request.headers)
    big = len(body) >= OFFLOAD_BYTES
    if media != ARROW_STREAM:
        if big:
            return await asyncio.to_thread(plan_json, *args, producer, limits, cfg.data_limits)
        return plan_json(*args, producer, limits, cfg.data_limits)
    measure = functools.partial(measure_arrow, body, limits)
    declared = await asyncio.to_thread(measure) if big else measure()
    charge = request.scope.get(DECODED_SCOPE_KEY)
    if charge is not None:  # None: cluster traffic, never limited
        await charge(declared.decoded_bytes - len(body))
    if big or declared.decoded_bytes >= OFFLOAD_BYTES:
        return await asyncio.to_thread(plan_arrow, *args, producer, limits, True, cfg.data_limits)
    return plan_arrow(*args, producer, limits, True, cfg.data_limits)


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


async def fetch_records(request: Request) -> Response:
    services = _services(request)
    topic = request.path_params["topic"]
    auth.require(request, "topic", topic, "read")
    partition = path_partition(request)
    state = await _local_replica(services, request, topic, partition)
    if not isinstance(state, Partition):
        return state
    params = fetch_params(request)
    params = params._replace(max_bytes=capped_max_bytes(params.max_bytes, services.config))
    # HTTP readers read committed: nothing past the last stable offset, no aborted records,
    # no transaction markers (ingest/service/txn_log.py).
    result = await services.reads.fetch(
        state,
        params.offset,
        params.max_records,
        params.max_bytes,
        params.wait_ms,
        committed=True,
    )
    leader = (  # a follower read (KIP-392) still names the leader
        services.config.advertised_url
        if state.role is Role.LEADER
        else services.metadata.broker_url(state.leader_id)
        if state.leader_id is not None
        else None
    )
    return await fetch_response(request, result, params.value_format, leader)


async def _local_replica(
    services: Services, request: Request, topic: str, partition: int
) -> Partition | Response:
    """This broker's state if it leads the partition (or may serve a fetch node's read as an
    in-sync follower), else the leader's proxied answer."""
    follower = _follower_read(services, request, topic, partition)
    if follower is not None:
        return follower
    return await _local_leader(services, request, topic, partition)


def _follower_read(
    services: Services, request: Request, topic: str, partition: int
) -> Partition | None:
    """Kafka's follower fetching (KIP-392), for fetch nodes only: an in-sync follower serves
    what it has up to its own high watermark (committed records, never truncated). Anything
    newer, or a follower out of the ISR, falls through to the leader."""
    secret = services.cluster_secret()
    if REPLICA_READ_HEADER not in request.headers or not secret:
        return None
    given = request.headers.get(CLUSTER_TOKEN_HEADER, "")
    if not hmac.compare_digest(given, secret):
        return None
    state = services.reads.replica(topic, partition)
    if (
        state is None
        or state.role is not Role.FOLLOWER
        or services.config.broker_id not in state.isr
    ):
        return None
    raw = request.query_params.get("offset", "")
    if not raw.isdigit() or not log_start(state) <= int(raw) <= state.high_watermark:
        return None
    return state


async def _local_leader(
    services: Services, request: Request, topic: str, partition: int
) -> Partition | Response:
    """This broker's state if it leads the partition, else the leader's proxied answer."""
    view = await services.metadata.require_topic(topic, partition)
    state = services.reads.leader_state(topic, partition)
    if state is not None:
        return state
    if FORWARDED_HEADER in request.headers:
        raise TierlogError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"broker {services.config.broker_id} does not lead {topic}-{partition}",
        )
    url = services.metadata.leader_url(view, partition)
    return await services.forwarder.proxy(url, request)


async def list_offsets(request: Request) -> Response:
    """?at=earliest|latest|<timestamp ms>: Kafka's ListOffsets for one partition, across
    tiers (earliest is the log start of the whole log, hot and cold)."""
    services = _services(request)
    topic = request.path_params["topic"]
    auth.require(request, "topic", topic, "describe")  # Kafka's ListOffsets: DESCRIBE
    partition = path_partition(request)
    state = await _local_leader(services, request, topic, partition)
    if not isinstance(state, Partition):
        return state
    reads = services.reads
    at = request.query_params.get("at", "latest")
    body: dict[str, object] = {"partition": partition, "at": at}
    if at == "latest":
        body["offset"] = state.high_watermark
    elif at != "earliest":
        ts = timestamp_param(at)
        body["offset"] = await reads.offset_for_timestamp(state, ts)
    # One lookup serves both fields: each may wait out the manifest's deadline.
    body["log_start_offset"] = await reads.earliest(state)
    body.setdefault("offset", body["log_start_offset"])
    body["high_watermark"] = state.high_watermark
    leader = services.config.advertised_url
    return JSONResponse(body, headers={"X-Tierlog-Leader": leader})


routes = [
    Route("/topics/{topic}/records", produce, methods=["POST"]),
    Route("/topics/{topic}/partitions/{partition}/records", fetch_records, methods=["GET"]),
    Route("/topics/{topic}/partitions/{partition}/offsets", list_offsets, methods=["GET"]),
]
