"""Erasure requests (issue 31): erase every record with given keys from both tiers.

POST answers 202 with the pending request; GET shows one (state, who, when, per-tier
results) or lists the topic's. The rules live in ingest/service/erasure.py. ACL: DELETE on
the topic, as Kafka asks for DeleteRecords (removing records is what both do).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.routing import Route

from cluster.http import auth
from cluster.http.responses import JSONResponse, json_object, query_int
from logformat.errors import ErrorCode, TierlogError

if TYPE_CHECKING:
    from ingest.service.erasure import Erasures

BODY_LIMIT = 4 * 1024 * 1024  # 10,000 keys of a few hundred bytes each


def _only_params(request: Request, *allowed: str) -> None:
    """Refuse what the OpenAPI document does not allow: unknown query parameters, and an
    empty value for a known one (`limit=` is not a number)."""
    unknown = sorted(set(request.query_params) - set(allowed))
    if unknown:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, f"unknown query parameter(s): {', '.join(unknown)}"
        )
    empty = [name for name in allowed if request.query_params.get(name) == ""]
    if empty:
        raise TierlogError(ErrorCode.INVALID_REQUEST, f"query parameter {empty[0]!r} is empty")


def _erasures(request: Request) -> Erasures:
    erasures: Erasures = request.app.state.services.erasures
    return erasures


async def create_erasure(request: Request) -> JSONResponse:
    topic = request.path_params["topic"]
    _only_params(request)
    doc = await json_object(request, BODY_LIMIT)
    made = await _erasures(request).create(auth.principal(request), topic, doc)
    location = f"/topics/{topic}/erasures/{made.id}"
    return JSONResponse(made.to_json(), status_code=202, headers={"Location": location})


async def get_erasure(request: Request) -> JSONResponse:
    topic, eid = request.path_params["topic"], request.path_params["erasure_id"]
    _only_params(request)
    found = await _erasures(request).get(auth.principal(request), topic, eid)
    return JSONResponse(found.to_json())


async def list_erasures(request: Request) -> JSONResponse:
    topic = request.path_params["topic"]
    _only_params(request, "limit")
    limit = query_int(request, "limit", 100, 1, 1000)
    found = await _erasures(request).list(auth.principal(request), topic, limit)
    return JSONResponse({"erasures": [e.to_json() for e in found]})


routes = [
    Route("/topics/{topic}/erasures", create_erasure, methods=["POST"]),
    Route("/topics/{topic}/erasures", list_erasures, methods=["GET"]),
    Route("/topics/{topic}/erasures/{erasure_id}", get_erasure, methods=["GET"]),
]
