"""Cluster-internal endpoints (replication, forwarded appends, partition state).

Separate paths from the public API, and each call must carry the cluster secret that every
broker reads from Postgres; clients never have it.
"""

from __future__ import annotations

import asyncio
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
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import scan

if TYPE_CHECKING:
    from ingest.service.services import Services

log = logging.getLogger("tierlog.api.internal")

MAX_INTERNAL_BODY = 256 * 1024 * 1024
SEGMENT_CHUNK = 1024 * 1024


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def _authorize(request: Request) -> Services:
    services = _services(request)
    services.replicas.require_cluster(request.headers.get(CLUSTER_TOKEN_HEADER, ""))
    return services


async def replica_fetch(request: Request) -> Response:
    replicas = _authorize(request).replicas
    body = await read_body(request, 1024 * 1024)
    return Response(await replicas.replica_fetch(body), media_type="application/octet-stream")


async def append(request: Request) -> JSONResponse:
    """A non-leader forwarded already-framed records: the leader assigns offsets and commits."""
    services = _authorize(request)
    topic = request.path_params["topic"]
    partition = path_partition(request)
    acks = int(request.query_params.get("acks", "-1"))
    view = await services.metadata.require_topic(topic, partition)
    produce = services.produce
    await produce.catch_up(topic, partition)
    produce.leader(topic, partition)  # refused before the body is read, as before
    body = await read_body(request, MAX_INTERNAL_BODY)
    result = scan(body)
    if result.torn or not result.frames:
        raise TierlogError(ErrorCode.CORRUPT_MESSAGE, "forwarded body is not whole frames")
    frames = [bytearray(body[pos : pos + h.size]) for pos, h in result.frames]
    results = await produce.append_forwarded(view, partition, frames, acks)
    return JSONResponse({"results": [[r.base_offset, r.last_offset] for r in results]})


async def led_partitions(request: Request) -> JSONResponse:
    """Offsets and stats of the partitions of a topic this broker leads (for describe on
    other nodes: ingest/service/topic_describe.py)."""
    out = await _authorize(request).describe.led(request.path_params["topic"])
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
    replicas = _authorize(request).replicas
    topic = request.path_params["topic"]
    partition = path_partition(request)
    raw_base, raw_end = request.path_params["base_offset"], request.query_params.get("end_offset")
    if not raw_base.isdigit() or (raw_end is not None and not raw_end.isdigit()):
        raise TierlogError(ErrorCode.INVALID_REQUEST, "base_offset and end_offset are offsets")
    end = None if raw_end is None else int(raw_end)
    found = await replicas.open_segment(topic, partition, int(raw_base), end)
    body = _File(found.fd)
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


async def frame(request: Request) -> Response:
    """One whole frame of a replica hosted here, by its base offset, for a peer putting back
    its corrupt copy (ingest/replication/frame_repair.py)."""
    replicas = _authorize(request).replicas
    raw = request.path_params["offset"]
    topic_id = request.query_params.get("topic_id", "")
    if not raw.isdigit() or not topic_id:
        raise TierlogError(ErrorCode.INVALID_REQUEST, "offset is an offset; topic_id is needed")
    data = await replicas.frame(
        request.path_params["topic"], topic_id, path_partition(request), int(raw)
    )
    return Response(data, media_type="application/octet-stream")


routes = [
    Route("/internal/replicas/fetch", replica_fetch, methods=["POST"]),
    Route("/internal/topics/{topic}/partitions/{partition}/append", append, methods=["POST"]),
    Route("/internal/topics/{topic}/led", led_partitions, methods=["GET"]),
    Route(
        "/internal/topics/{topic}/partitions/{partition}/segments/{base_offset}",
        segment,
        methods=["GET"],
    ),
    Route(
        "/internal/topics/{topic}/partitions/{partition}/frames/{offset}", frame, methods=["GET"]
    ),
]
