"""The fetch node's HTTP API: the public fetch and offsets endpoints (docs/design.md §5),
topic reads, and operations. Responses are the brokers' byte for byte: the same encoder
(cluster/http/fetch_response.py), the same error documents.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cluster.http import auth
from cluster.http.admission import ConcurrencyMiddleware
from cluster.http.api_docs import docs_routes
from cluster.http.auth import AuthMiddleware
from cluster.http.cross_site import CrossSiteGuard, own_origins
from cluster.http.fetch_response import fetch_params, fetch_response
from cluster.http.limits import LimitSettings, limits_middleware
from cluster.http.request_metrics import RequestMetrics
from cluster.http.responses import JSONResponse, exception_handlers, path_partition, timestamp_param
from cluster.openapi.document import OPENAPI, for_auth
from cluster.read_contract import ColdRange, ColdReader, FetchResult
from fetch import node_search, typed_answers
from logformat.errors import TierlogError

if TYPE_CHECKING:
    from cluster.metadata_cache import TopicView
    from fetch.node import FetchNode

log = logging.getLogger("tierlog.fetch.api")


def _node(request: Request) -> FetchNode:
    node: FetchNode = request.app.state.node
    return node


def _cold(node: FetchNode, view: TopicView) -> ColdReader | None:
    return node.cold if view.config.remote_storage_enable else None


async def _cold_range(
    cold: ColdReader, view: TopicView, partition: int, offset: int | None
) -> ColdRange | None:
    """The cold range if `offset` may be in it. Without the manifest (Postgres away), the
    last known range: an offset past it goes to a replica, which knows its own log."""
    try:
        rng = await cold.cold_range(view.info.id, partition)
        if offset is not None and (rng is None or offset >= rng.end):
            rng = await cold.cold_range(view.info.id, partition, fresh=True)  # tiered since?
    except TierlogError:
        known = cold.known_range(view.info.id, partition)
        rng = None if known is None else known[0]
        if rng is None or offset is None or not rng.start <= offset < rng.end:
            return None
    return rng


async def fetch_records(request: Request) -> Response:
    """Offsets in the cold range are read here from S3; everything else goes to a replica
    (which also answers 416 for offsets below the log start, naming it)."""
    node = _node(request)
    auth.require(request, "topic", request.path_params["topic"], "read")
    partition = path_partition(request)
    view = await node.cache.require_topic(request.path_params["topic"], partition)
    params = fetch_params(request, typed=True)
    columns = typed_answers.columns_param(request)
    if columns:
        typed_answers.require_typed(view)
    cold = _cold(node, view)
    if cold is None:
        return await _hot(node, view, partition, request, columns)
    rng = await _cold_range(cold, view, partition, params.offset)
    offset = params.offset
    if offset is None and rng is not None:
        offset = rng.start
    if rng is None or offset is None or not rng.start <= offset < rng.end:
        return await _hot(node, view, partition, request, columns)
    hot = await node.router.hot_offsets(view, partition)
    # The cold range is all committed, so it bounds the high watermark from below even when
    # the leader cannot be asked: cold reads keep working with every broker down.
    hw = max(rng.end, hot["high_watermark"] if hot else 0)
    start = min(rng.start, hot["log_start_offset"]) if hot else rng.start
    got = await cold.read(
        view.info.name,
        view.info.id,
        partition,
        offset,
        rng.end,
        params.max_records,
        params.max_bytes,
    )
    batch = got.batch
    if columns:
        batch = await typed_answers.with_cold_columns(cold, view, partition, batch, columns)
    result = FetchResult(batch, got.next_offset, hw, start)
    return await fetch_response(request, result, params.value_format, None)


async def _hot(
    node: FetchNode, view: TopicView, partition: int, request: Request, columns: tuple[str, ...]
) -> Response:
    """A replica's answer; with typed columns asked, its values decoded here."""
    response = await node.router.fetch(view, partition, request)
    return await node.typing.answer(view, response, columns) if columns else response


async def list_offsets(request: Request) -> Response:
    """earliest (across tiers) and timestamps found in cold files are answered here; latest,
    and timestamps newer than the cold tier, by the leader."""
    node = _node(request)
    auth.require(request, "topic", request.path_params["topic"], "describe")
    partition = path_partition(request)
    view = await node.cache.require_topic(request.path_params["topic"], partition)
    cold = _cold(node, view)
    at = request.query_params.get("at", "latest")
    if cold is None or at == "latest":
        return await node.router.leader(view, partition, request)
    rng = await cold.cold_range(view.info.id, partition)
    if rng is None:
        return await node.router.leader(view, partition, request)
    if at == "earliest":
        offset: int | None = None
    else:
        ts = timestamp_param(at)
        offset = await cold.offset_for_timestamp(view.info.name, view.info.id, partition, ts)
        if offset is None:  # every cold record is older: the hot tier's answer
            return await node.router.leader(view, partition, request)
    hot = await node.router.hot_offsets(view, partition)
    start = min(rng.start, hot["log_start_offset"]) if hot else rng.start
    return JSONResponse(
        {
            "partition": partition,
            "at": at,
            "offset": start if offset is None else offset,
            "log_start_offset": start,
            "high_watermark": max(rng.end, hot["high_watermark"] if hot else 0),
        }
    )


async def topics(request: Request) -> Response:
    return await _node(request).router.any_broker(request)


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    node = _node(request)
    if node.ready and node.cache.loaded:
        return JSONResponse({"status": "ready", "role": "fetch"})
    return JSONResponse({"status": "starting", "role": "fetch"}, status_code=503)


async def metrics(request: Request) -> Response:
    auth.require_metrics_reader(request)  # with auth on: a key, DESCRIBE on the cluster
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


async def openapi(request: Request) -> JSONResponse:
    return JSONResponse(request.app.state.openapi)


def served_openapi(app_routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """The brokers' OpenAPI document cut down to the operations this node serves (its reads,
    offsets, topic listings and, when mounted, consumer groups)."""
    served = {
        (r.path, m.lower())
        for r in app_routes
        if isinstance(r, Route)
        for m in r.methods or ()
        if m != "HEAD"
    }
    paths: dict[str, Any] = {}
    for path, item in OPENAPI["paths"].items():
        ops = {k: v for k, v in item.items() if (path, k) in served}
        if ops:
            paths[path] = {
                **({"parameters": item["parameters"]} if "parameters" in item else {}),
                **ops,
            }
    info = {**OPENAPI["info"], "title": "tierlog fetch node"}
    return {**OPENAPI, "info": info, "paths": paths}


routes: list[BaseRoute] = [
    Route("/topics/{topic}/partitions/{partition}/records", fetch_records, methods=["GET"]),
    Route("/topics/{topic}/partitions/{partition}/offsets", list_offsets, methods=["GET"]),
    Route("/topics/{topic}/search", node_search.search, methods=["GET"]),
    Route("/topics", topics, methods=["GET"]),
    Route("/topics/{topic}", topics, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
    Route("/openapi.json", openapi, methods=["GET"]),
    *docs_routes(),  # /docs, as on brokers
]


def build_app(
    node: FetchNode,
    extra_routes: Sequence[BaseRoute] = (),
    lifespan: Callable[[Any], AbstractAsyncContextManager[None]] | None = None,
) -> Starlette:
    """The node's app; `extra_routes` (e.g. consumer groups) are mounted beside its own and
    find the node as `request.app.state.node` (engine, metadata cache, router)."""
    app = Starlette(
        routes=[*routes, *extra_routes],
        exception_handlers=exception_handlers(log),
        lifespan=lifespan,
    )
    app.state.node = node
    # The routes are fixed from here on.
    app.state.openapi = for_auth(served_openapi(app.routes), node.config.auth.enabled)
    # Quotas and overload protection, inside auth (see ingest/api/app.py): consumers reading
    # through a fetch node are held to their consumer_byte_rate here too.
    limits = LimitSettings()
    app.add_middleware(limits_middleware(limits, node.engine, lambda: node.cluster_secret))
    app.add_middleware(ConcurrencyMiddleware, limits=node.config.concurrency)  # inside auth
    app.add_middleware(AuthMiddleware, authorizer=node.authorizer)  # see ingest/api/app.py
    cfg = node.config
    origins = own_origins([], cfg.host, cfg.port, cfg.tls_cert is not None)
    app.add_middleware(CrossSiteGuard, origins=origins)
    app.add_middleware(RequestMetrics)
    return app
