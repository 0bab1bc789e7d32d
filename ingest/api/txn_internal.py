"""The cluster-internal marker endpoint: a transaction coordinator on another broker asks
this partition's leader to write a commit or abort marker (WriteTxnMarkers' effect)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from cluster.http.responses import JSONResponse, parse_json, read_body
from ingest.api.internal import _authorize
from logformat.errors import ErrorCode, TierlogError


async def write_marker(request: Request) -> JSONResponse:
    services = _authorize(request)
    doc = parse_json(await read_body(request, 4096))
    try:
        topic, partition = str(doc["topic"]), int(doc["partition"])
        pid, commit = int(doc["producer_id"]), bool(doc["commit"])
    except (KeyError, TypeError, ValueError):
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, "a marker needs topic, partition, producer_id, commit"
        ) from None
    offset = await services.transactions.write_marker(topic, partition, pid, commit)
    return JSONResponse({"offset": offset})


routes = [Route("/internal/txn/markers", write_marker, methods=["POST"])]
