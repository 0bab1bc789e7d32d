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
from cluster.read_contract import ColdReader
from ingest import metrics
from ingest.produce import ProducePlan, json_offsets, plan_arrow, plan_json, producer_fields
from ingest.replication.partition import AppendResult, Partition, Role
from ingest.service.expansion import expansion_limits
from ingest.service.fetch_rules import capped_max_bytes
from ingest.service.txn_log import txn_log
from ingest.tiered import tiered_fetch
from logformat.errors import ErrorCode, TierlogError
from logformat.expansion import measure_arrow
from metadata.types import TopicNamePartition

if TYPE_CHECKING:
    from cluster.metadata_cache import TopicView
    from ingest.broker import Broker

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def produce(request: Request) -> Response:
    broker: Broker = request.app.state.broker
    topic = request.path_params["topic"]
    acks_raw = request.query_params.get("acks", "all")
    if acks_raw not in ACKS:
        raise TierlogError(ErrorCode.INVALID_REQUEST, f"acks must be all, 1 or 0; got {acks_raw!r}")
    acks = ACKS[acks_raw]
    # The client is authorized here, at the first hop; the leader trusts the cluster
    # credential the forwarded frames carry (/internal/.../append).
    auth.require(request, "topic", topic, "write")
    media = _media_type(request)
    if media not in (ARROW_STREAM, "application/json"):  # also refused by api/cross_site.py
        raise TierlogError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            f"produce takes application/json or {ARROW_STREAM}, not {media!r}",
        )
    view = await broker.cache.require_topic(topic)
    body = await read_body(request, broker.config.max_request_bytes)
    # Everything is validated and framed before anything is written: bad input writes nothing.
    plan = await _plan(request, broker, view, media, body)
    await broker.schema_ids.check_plan(topic, view.config, plan)
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


async def _plan(
    request: Request, broker: Broker, view: TopicView, media: str, body: bytes
) -> ProducePlan:
    """The request's frames. The body is measured against the expansion limits before it
    is decoded (an Arrow stream's decoded size is held in the in-flight budget and counted
    against the quota like body bytes); big bodies are decoded off the event loop."""
    cfg = broker.config
    limits = expansion_limits(cfg)
    topic = view.info.name
    sticky, now_ms = broker.sticky_for(topic), int(time.time() * 1000)
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
        broker.untiered_bound.check(state)  # client produce only: followers fetch, never here
        return await state.append(frames, acks, view.config.min_insync_replicas, timeout_s)
    if forwarded:  # one hop only: the sender's metadata is stale, it will retry
        raise TierlogError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"broker {broker.config.broker_id} does not lead {view.info.name}-{partition}",
        )
    url = broker.cache.leader_url(view, partition)
    return await broker.forwarder.append(url, view.info.name, partition, frames, acks, {})


def _leader_header(broker: Broker, view: TopicView, partition: int) -> dict[str, str]:
    url = broker.cache.leader_url_or_none(view, partition)
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
    auth.require(request, "topic", topic, "read")
    partition = path_partition(request)
    state = await _local_replica(broker, request, topic, partition)
    if not isinstance(state, Partition):
        return state
    params = fetch_params(request)
    params = params._replace(max_bytes=capped_max_bytes(params.max_bytes, broker.config))
    cold = _cold_reader(broker, topic)
    try:
        result = await tiered_fetch.fetch_tiered(
            state, cold, params.offset, params.max_records, params.max_bytes, params.wait_ms
        )
        # HTTP readers read committed: nothing past the last stable offset, no aborted
        # records, no transaction markers (ingest/service/txn_log.py).
        txns = await txn_log(broker).view(state, committed=True)
        result = txns.apply(result, params.offset or 0)
    except TierlogError as exc:
        offset = params.offset
        if (
            cold is None
            and exc.code is ErrorCode.OFFSET_OUT_OF_RANGE
            and offset is not None
            and offset < state.log.log_start_offset
        ):
            hint = await broker.tier_status.out_of_range(state, offset)
            if hint is not None:  # no cold reader here (S3 not configured): say where it is
                raise hint from None
        raise
    metrics.FETCHED_RECORDS.labels(topic).inc(result.batch.num_rows)
    leader = (  # a follower read (KIP-392) still names the leader
        broker.config.advertised_url
        if state.role is Role.LEADER
        else broker.cache.broker_url(state.leader_id)
        if state.leader_id is not None
        else None
    )
    return await fetch_response(request, result, params.value_format, leader)


def _cold_reader(broker: Broker, topic: str) -> ColdReader | None:
    """The broker's cold reader when the topic is tiered (None: hot reads only)."""
    if broker.cold_reader is None:
        return None
    view = broker.cache.topic(topic)
    return broker.cold_reader if view is not None and view.config.remote_storage_enable else None


async def _local_replica(
    broker: Broker, request: Request, topic: str, partition: int
) -> Partition | Response:
    """This broker's state if it leads the partition (or may serve a fetch node's read as an
    in-sync follower), else the leader's proxied answer."""
    follower = _follower_read(broker, request, topic, partition)
    return (
        follower if follower is not None else await _local_leader(broker, request, topic, partition)
    )


def _follower_read(
    broker: Broker, request: Request, topic: str, partition: int
) -> Partition | None:
    """Kafka's follower fetching (KIP-392), for fetch nodes only: an in-sync follower serves
    what it has up to its own high watermark (committed records, never truncated). Anything
    newer, or a follower out of the ISR, falls through to the leader."""
    if REPLICA_READ_HEADER not in request.headers or not broker.cluster_secret:
        return None
    given = request.headers.get(CLUSTER_TOKEN_HEADER, "")
    if not hmac.compare_digest(given, broker.cluster_secret):
        return None
    state = broker.partitions.get(TopicNamePartition(topic, partition))
    if state is None or state.role is not Role.FOLLOWER or broker.config.broker_id not in state.isr:
        return None
    raw = request.query_params.get("offset", "")
    if not raw.isdigit() or not state.log.log_start_offset <= int(raw) <= state.high_watermark:
        return None
    return state


async def _local_leader(
    broker: Broker, request: Request, topic: str, partition: int
) -> Partition | Response:
    """This broker's state if it leads the partition, else the leader's proxied answer."""
    view = await broker.cache.require_topic(topic, partition)
    state = broker.leader_state(topic, partition)
    if state is not None:
        return state
    if FORWARDED_HEADER in request.headers:
        raise TierlogError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"broker {broker.config.broker_id} does not lead {topic}-{partition}",
        )
    return await broker.forwarder.proxy(broker.cache.leader_url(view, partition), request)


async def list_offsets(request: Request) -> Response:
    """?at=earliest|latest|<timestamp ms>: Kafka's ListOffsets for one partition, across
    tiers (earliest is the log start of the whole log, hot and cold)."""
    broker: Broker = request.app.state.broker
    topic = request.path_params["topic"]
    auth.require(request, "topic", topic, "describe")  # Kafka's ListOffsets: DESCRIBE
    partition = path_partition(request)
    state = await _local_leader(broker, request, topic, partition)
    if not isinstance(state, Partition):
        return state
    cold = _cold_reader(broker, topic)
    at = request.query_params.get("at", "latest")
    body: dict[str, object] = {"partition": partition, "at": at}
    if at == "latest":
        body["offset"] = state.high_watermark
    elif at != "earliest":
        ts = timestamp_param(at)
        body["offset"] = await tiered_fetch.offset_for_timestamp(state, cold, ts)
    # One lookup serves both fields: each may wait out the manifest's deadline.
    body["log_start_offset"] = await tiered_fetch.earliest(state, cold)
    body.setdefault("offset", body["log_start_offset"])
    body["high_watermark"] = state.high_watermark
    return JSONResponse(body, headers={"X-Tierlog-Leader": broker.config.advertised_url})


routes = [
    Route("/topics/{topic}/records", produce, methods=["POST"]),
    Route("/topics/{topic}/partitions/{partition}/records", fetch_records, methods=["GET"]),
    Route("/topics/{topic}/partitions/{partition}/offsets", list_offsets, methods=["GET"]),
]
