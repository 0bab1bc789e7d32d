"""Idempotent producers: ids handed out through Postgres (Kafka's InitProducerId)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.routing import Route

from cluster.http import auth
from cluster.http.responses import JSONResponse

if TYPE_CHECKING:
    from ingest.broker import Broker


async def init_producer(request: Request) -> JSONResponse:
    """A fresh producer id at epoch 0; send X-Tierlog-Producer-Id/-Producer-Epoch/-Sequence
    with each produce request (one partition per request, sequences counted per partition)."""
    broker: Broker = request.app.state.broker
    # Kafka's IDEMPOTENT_WRITE on the cluster is "write" on the cluster here; WRITE on any
    # topic is enough too (KIP-679).
    auth.require_any_topic_or_cluster(request, "write")
    producer_id = await asyncio.to_thread(broker.partition_repo.allocate_producer_id)
    return JSONResponse({"producer_id": producer_id, "producer_epoch": 0}, status_code=201)


routes = [Route("/producers", init_producer, methods=["POST"])]
