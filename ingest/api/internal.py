"""Cluster-internal endpoints (replication, forwarded appends, partition state).

Separate paths from the public API, and each call must carry the cluster secret that every
broker reads from Postgres; clients never have it.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ingest.api.http import JSONResponse, path_partition, read_body
from ingest.replication_wire import CLUSTER_TOKEN_HEADER
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import scan

if TYPE_CHECKING:
    from ingest.broker import Broker

MAX_INTERNAL_BODY = 256 * 1024 * 1024


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
    view = broker.topic_view(topic)
    broker.check_partition(view, partition)
    state = broker.leader_state(topic, partition)
    if state is None:
        raise TierlogError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"broker {broker.config.broker_id} does not lead {topic}-{partition}",
        )
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
    """Offsets of the partitions of a topic this broker leads (for describe on other nodes)."""
    broker = _authorize(request)
    topic = request.path_params["topic"]
    out = {}
    for (name, p), state in broker.partitions.items():
        if name == topic and broker.leader_state(name, p) is not None:
            out[str(p)] = {
                "log_start_offset": state.log.log_start_offset,
                "high_watermark": state.high_watermark,
                "log_end_offset": state.log.log_end_offset,
            }
    return JSONResponse(out)


routes = [
    Route("/internal/replicas/fetch", replica_fetch, methods=["POST"]),
    Route("/internal/topics/{topic}/partitions/{partition}/append", append, methods=["POST"]),
    Route("/internal/topics/{topic}/led", led_partitions, methods=["GET"]),
]
