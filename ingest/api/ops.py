"""Operations: liveness, readiness, Prometheus metrics, brokers, the OpenAPI document."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cluster.http import auth
from cluster.http.responses import JSONResponse
from cluster.openapi.document import OPENAPI, for_auth

if TYPE_CHECKING:
    from ingest.service.node_status import NodeStatus
    from ingest.service.services import Services


_OPEN = for_auth(OPENAPI, auth_enabled=False)  # the document of an --insecure broker


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def _status(request: Request) -> NodeStatus:
    services: Services = request.app.state.services
    return services.status


async def readyz(request: Request) -> JSONResponse:
    readiness = _status(request).readiness()
    return JSONResponse(readiness.body, status_code=200 if readiness.ready else 503)


async def metrics(request: Request) -> Response:
    auth.require_metrics_reader(request)  # with auth on: a key, DESCRIBE on the cluster
    # The process's metrics, and the node's own when it has a registry of its own (several
    # brokers in one process: tests/harness/); a broker process's node registry is the default.
    body = generate_latest(REGISTRY)
    registry = _status(request).registry
    if registry is not REGISTRY:
        body += generate_latest(registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


async def brokers(request: Request) -> JSONResponse:
    infos, controller = await _status(request).brokers()
    return JSONResponse(
        {
            "brokers": [
                {"id": b.id, "url": b.url, "alive": b.alive, "controller": b.id == controller}
                for b in infos
            ]
        }
    )


async def openapi(request: Request) -> JSONResponse:
    return JSONResponse(OPENAPI if _status(request).auth_enabled else _OPEN)


routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
    Route("/brokers", brokers, methods=["GET"]),
    Route("/openapi.json", openapi, methods=["GET"]),
]
