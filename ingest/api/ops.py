"""Operations: liveness, readiness, Prometheus metrics, brokers, the OpenAPI document."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cluster.http import auth
from cluster.http.responses import JSONResponse
from cluster.openapi.document import OPENAPI, for_auth

if TYPE_CHECKING:
    from ingest.broker import Broker


_OPEN = for_auth(OPENAPI, auth_enabled=False)  # the document of an --insecure broker


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    broker: Broker = request.app.state.broker
    # Ready means a member of the cluster: started, metadata loaded and the lease current.
    # A broker whose lease lapsed (slow start, Postgres unreachable) is dead to the others.
    if broker.ready and broker.cache.loaded and broker.lease_ok():
        # Still ready with offline logs (it serves its other partitions), but it says which.
        replicas = broker.replicas
        body: dict[str, object] = {"status": "ready", "broker_id": broker.config.broker_id}
        if replicas is not None and replicas.offline():
            body["offline_partitions"] = replicas.offline()
            body["offline_reasons"] = replicas.offline_reasons()  # e.g. "disk full (ENOSPC)"
        return JSONResponse(body)
    status = "lease lapsed" if broker.ready and broker.cache.loaded else "starting"
    return JSONResponse({"status": status, "broker_id": broker.config.broker_id}, status_code=503)


async def metrics(request: Request) -> Response:
    auth.require_metrics_reader(request)  # with auth on: a key, DESCRIBE on the cluster
    broker: Broker = request.app.state.broker
    # The process's metrics, and the node's own when it has a registry of its own (several
    # brokers in one process: tests/harness/); a broker process's node registry is the default.
    body = generate_latest(REGISTRY)
    if broker.registry is not REGISTRY:
        body += generate_latest(broker.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


async def brokers(request: Request) -> JSONResponse:
    broker: Broker = request.app.state.broker
    infos = await asyncio.to_thread(broker.brokers.list)
    # The holder of the controller lease, by the database's clock; None while it is free,
    # expired or held by a dead broker (then no broker is marked).
    controller, _ = await asyncio.to_thread(broker.controller_lease.holder)
    return JSONResponse(
        {
            "brokers": [
                {"id": b.id, "url": b.url, "alive": b.alive, "controller": b.id == controller}
                for b in infos
            ]
        }
    )


async def openapi(request: Request) -> JSONResponse:
    broker: Broker = request.app.state.broker
    return JSONResponse(_OPEN if not broker.config.auth.enabled else OPENAPI)


routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
    Route("/brokers", brokers, methods=["GET"]),
    Route("/openapi.json", openapi, methods=["GET"]),
]
