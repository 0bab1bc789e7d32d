"""Cluster-internal endpoints (replication, forwarded appends, partition state).

Separate paths from the public API, and each call must carry the cluster secret that every
broker reads from Postgres; clients never have it.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from cluster.http.responses import JSONResponse, path_partition, read_body
from cluster.internal_http import CLUSTER_TOKEN_HEADER
from ingest.api.partition_stats import led_stats
from ingest.replication import corruption
from ingest.service.txn_log import txn_log
from ingest.tiered.tier_status import TierStatus
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import scan
from metadata.types import TopicNamePartition

if TYPE_CHECKING:
    from ingest.broker import Broker

log = logging.getLogger("tierlog.api.internal")

MAX_INTERNAL_BODY = 256 * 1024 * 1024
SEGMENT_CHUNK = 1024 * 1024


def _authorize(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    given = request.headers.get(CLUSTER_TOKEN_HEADER, "")
    if not broker.cluster_secret or not hmac.compare_digest(given, broker.cluster_secret):
        raise TierlogError(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "internal endpoints need the cluster credential"
        )
    return broker


async def replica_fetch(request: Request) -> Response:
    broker = _authorize(request)
    body = await read_body(request, 1024 * 1024)
    return Response(await broker.fetch_handler.handle(body), media_type="application/octet-stream")


async def append(request: Request) -> JSONResponse:
    """A non-leader forwarded already-framed records: the leader assigns offsets and commits."""
    broker = _authorize(request)
    topic = request.path_params["topic"]
    partition = path_partition(request)
    acks = int(request.query_params.get("acks", "-1"))
    view = await broker.cache.require_topic(topic, partition)
    state = broker.require_leader(topic, partition)
    broker.untiered_bound.check(state)  # a client's produce, forwarded: the same backpressure
    body = await read_body(request, MAX_INTERNAL_BODY)
    result = scan(body)
    if result.torn or not result.frames:
        raise TierlogError(ErrorCode.CORRUPT_MESSAGE, "forwarded body is not whole frames")
    frames = [bytearray(body[pos : pos + h.size]) for pos, h in result.frames]
    results = await state.append(
        frames, acks, view.config.min_insync_replicas, broker.config.request_timeout_ms / 1000
    )
    return JSONResponse({"results": [[r.base_offset, r.last_offset] for r in results]})


async def led_partitions(request: Request) -> JSONResponse:
    """Offsets and stats of the partitions of a topic this broker leads (for describe on
    other nodes: ingest/api/partition_stats.py)."""
    broker = _authorize(request)
    topic = request.path_params["topic"]
    led = {
        p: state
        for (name, p), state in broker.partitions.items()
        if name == topic and broker.leader_state(name, p) is not None
    }
    view = broker.cache.topic(topic)
    tiering = view is not None and view.config.remote_storage_enable
    tiers: dict[int, TierStatus] | None = {}
    if tiering and led and view is not None:
        try:
            tiers = await broker.tier_status.of_partitions(view.info.id, list(led))
        except Exception:  # describe shows the offsets without the lag figures
            log.exception("reading the cold manifest failed", extra={"topic": topic})
            tiers = None
    txns = txn_log(broker)
    out = {
        str(p): led_stats(
            state,
            tiering,
            tiers.get(p) if tiers is not None else None,
            await txns.described_stable(state),
        )
        for p, state in led.items()
    }
    return JSONResponse(out)


class _File:
    """A descriptor closed exactly once, by the body when it ends or by the response after."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)

    async def chunks(self, size: int) -> AsyncIterator[bytes]:
        try:
            pos = 0
            while pos < size and self.fd is not None:
                chunk = await asyncio.to_thread(
                    os.pread, self.fd, min(SEGMENT_CHUNK, size - pos), pos
                )
                if not chunk:
                    raise OSError(f"segment file ended at {pos} of {size} bytes")
                yield chunk
                pos += len(chunk)
        finally:
            self.close()


async def segment(request: Request) -> Response:
    """The bytes of a sealed, committed segment this broker holds (leader or follower), for
    the tiering worker, once every frame passed its CRC check (503 KAFKA_STORAGE_ERROR if
    not: the worker downloads from another replica). `?end_offset=` (optional) must match the
    segment's end, so a replica whose segment boundaries differ answers 404, not other bytes."""
    broker = _authorize(request)
    topic = request.path_params["topic"]
    partition = path_partition(request)
    raw_base, raw_end = request.path_params["base_offset"], request.query_params.get("end_offset")
    if not raw_base.isdigit() or (raw_end is not None and not raw_end.isdigit()):
        raise TierlogError(ErrorCode.INVALID_REQUEST, "base_offset and end_offset are offsets")
    base = int(raw_base)
    state = broker.partitions.get(TopicNamePartition(topic, partition))
    if state is None:
        raise TierlogError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"broker {broker.config.broker_id} hosts no replica of {topic}-{partition}",
        )
    hw = state.high_watermark
    found = next(
        (
            s
            for s in state.log.segments()
            if s.base_offset == base and s.sealed and s.next_offset <= hw
        ),
        None,
    )
    if found is None or (raw_end is not None and int(raw_end) != found.next_offset):
        raise TierlogError(
            ErrorCode.NOT_FOUND,
            f"broker {broker.config.broker_id} has no committed sealed segment {base} of "
            f"{topic}-{partition}" + (f" ending at {raw_end}" if raw_end is not None else ""),
        )
    try:  # our own descriptor: local retention may unlink the file while we stream it
        fd = await asyncio.to_thread(os.open, found.path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise TierlogError(
            ErrorCode.NOT_FOUND, f"segment {base} of {topic}-{partition} was just deleted"
        ) from None
    body = _File(fd)
    try:  # one CRC per frame before anything is sent: a corrupt copy is never handed out
        bad = await asyncio.to_thread(corruption.check_segment, fd, found.size, base)
    except BaseException:
        body.close()
        raise
    if bad is not None:
        body.close()
        raise corruption.segment_error(state, base, bad)
    return StreamingResponse(
        body.chunks(found.size),
        media_type="application/octet-stream",
        headers={
            "Content-Length": str(found.size),
            "X-Tierlog-Base-Offset": str(found.base_offset),
            "X-Tierlog-End-Offset": str(found.next_offset),
        },
        background=BackgroundTask(body.close),
    )


routes = [
    Route("/internal/replicas/fetch", replica_fetch, methods=["POST"]),
    Route("/internal/topics/{topic}/partitions/{partition}/append", append, methods=["POST"]),
    Route("/internal/topics/{topic}/led", led_partitions, methods=["GET"]),
    Route(
        "/internal/topics/{topic}/partitions/{partition}/segments/{base_offset}",
        segment,
        methods=["GET"],
    ),
]
