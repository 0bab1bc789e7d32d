"""Erasure requests (issue 31): erase every record with given keys from both tiers.

POST answers 202 with the pending request; GET shows one (state, who, when, per-tier
results) or lists the topic's. The rules live in ingest/service/erasure.py. ACL: DELETE on
the topic, as Kafka asks for DeleteRecords (removing records is what both do).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.routing import Route

from cluster.http import auth
from cluster.http.responses import JSONResponse, json_object, query_int
from ingest.api.topics import describe
from ingest.service import erasure
from logformat.errors import ErrorCode, TierlogError
from metadata.erasures import ErasureRepo

if TYPE_CHECKING:
    from ingest.broker import Broker

BODY_LIMIT = 4 * 1024 * 1024  # 10,000 keys of a few hundred bytes each


async def create_erasure(request: Request) -> JSONResponse:
    broker: Broker = request.app.state.broker
    topic = request.path_params["topic"]
    auth.require(request, "topic", topic, "delete")
    view = await broker.cache.require_topic(topic)
    keys = erasure.parse_keys(await json_object(request, BODY_LIMIT))
    doc = await describe(broker, view)
    ends = {
        p["partition"]: p["log_end_offset"]
        for p in doc["partitions"]
        if p["log_end_offset"] is not None
    }
    made = await asyncio.to_thread(
        erasure.accept,
        ErasureRepo(broker.engine),
        view.info.id,
        topic,
        keys,
        auth.principal(request),
        ends,
    )
    location = f"/topics/{topic}/erasures/{made.id}"
    return JSONResponse(made.to_json(), status_code=202, headers={"Location": location})


async def get_erasure(request: Request) -> JSONResponse:
    broker: Broker = request.app.state.broker
    topic, eid = request.path_params["topic"], request.path_params["erasure_id"]
    auth.require(request, "topic", topic, "describe")
    found = await asyncio.to_thread(ErasureRepo(broker.engine).get, topic, eid)
    if found is None:
        raise TierlogError(ErrorCode.NOT_FOUND, f"topic {topic!r} has no erasure {eid!r}")
    return JSONResponse(found.to_json())


async def list_erasures(request: Request) -> JSONResponse:
    broker: Broker = request.app.state.broker
    topic = request.path_params["topic"]
    auth.require(request, "topic", topic, "describe")
    limit = query_int(request, "limit", 100, 1, 1000)
    found = await asyncio.to_thread(ErasureRepo(broker.engine).list, topic, limit)
    return JSONResponse({"erasures": [e.to_json() for e in found]})


routes = [
    Route("/topics/{topic}/erasures", create_erasure, methods=["POST"]),
    Route("/topics/{topic}/erasures", list_erasures, methods=["GET"]),
    Route("/topics/{topic}/erasures/{erasure_id}", get_erasure, methods=["GET"]),
]
