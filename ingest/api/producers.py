"""Idempotent producers: ids handed out through Postgres (Kafka's InitProducerId)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.routing import Route

from ingest.api.http import JSONResponse

if TYPE_CHECKING:
    from ingest.broker import Broker


async def init_producer(request: Request) -> JSONResponse:
    """A fresh producer id at epoch 0; send X-Tierlog-Producer-Id/-Producer-Epoch/-Sequence
    with each produce request (one partition per request, sequences counted per partition)."""
    broker: Broker = request.app.state.broker
    producer_id = await asyncio.to_thread(broker.partition_repo.allocate_producer_id)
    return JSONResponse({"producer_id": producer_id, "producer_epoch": 0}, status_code=201)


routes = [Route("/producers", init_producer, methods=["POST"])]
