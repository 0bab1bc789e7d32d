"""Idempotent producers: ids handed out through Postgres (Kafka's InitProducerId)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.routing import Route

from cluster.http import auth
from cluster.http.responses import JSONResponse

if TYPE_CHECKING:
    from ingest.service.services import Services


async def init_producer(request: Request) -> JSONResponse:
    """A fresh producer id at epoch 0; send X-Tierlog-Producer-Id/-Producer-Epoch/-Sequence
    with each produce request (one partition per request, sequences counted per partition)."""
    services: Services = request.app.state.services
    producer_id = await services.producer_ids.allocate(auth.principal(request))
    return JSONResponse({"producer_id": producer_id, "producer_epoch": 0}, status_code=201)


routes = [Route("/producers", init_producer, methods=["POST"])]
