"""Overview: the brokers (alive, controller, leaderships), partitions under-replicated or
offline, and the sampler's charts of produce/fetch rates and tiering lag (last hour)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from console import auth
from console.cluster_api import ConsoleApiError
from console.history import History
from console.page import Page
from console.render import json_error, render
from console.rights import rights
from console.topic_details import describe_all

# (title, unit, history series, legend labels)
CHARTS = [
    ("Produce", "records/s", ["produce_records_per_s"], ["records/s"]),
    ("Produce", "bytes/s", ["produce_bytes_per_s"], ["bytes/s"]),
    ("Fetch", "records/s", ["fetch_records_per_s"], ["records/s"]),
    ("Tiering lag", "records", ["tiering_lag_records"], ["records not yet in S3"]),
    ("Tiering lag", "bytes", ["tiering_lag_bytes"], ["sealed bytes not yet in S3"]),
    ("Tiering lag", "seconds", ["tiering_lag_seconds"], ["oldest sealed segment waiting"]),
]


def partition_health(
    topics: list[dict[str, Any]], alive: set[int]
) -> tuple[list[dict[str, Any]], Counter[int]]:
    """Partitions under-replicated or offline, and how many partitions each broker leads."""
    troubled: list[dict[str, Any]] = []
    leads: Counter[int] = Counter()
    for topic in topics:
        for p in topic["partitions"]:
            leader = p.get("leader")
            if leader is not None:
                leads[leader] += 1
            offline = leader is None or leader not in alive
            under = len(p.get("isr") or []) < len(p.get("replicas") or [])
            if offline or under:
                state = "offline" if offline else "under-replicated"
                troubled.append({"topic": topic["name"], **p, "state": state})
    return troubled, leads


async def _status(request: Request) -> dict[str, Any]:
    api = request.app.state.api
    key = auth.api_key(request)
    brokers_doc, topics = await asyncio.gather(api.get("/brokers", key), describe_all(api, key))
    brokers = brokers_doc.get("brokers", [])
    alive = {b["id"] for b in brokers if b.get("alive")}
    troubled, leads = partition_health(topics, alive)
    return {
        "active": "overview",
        "brokers": brokers,
        "alive": len(alive),
        "leads": leads,
        "topics": len(topics),
        "partitions": sum(len(t["partitions"]) for t in topics),
        "troubled": troubled,
        "offline": sum(1 for t in troubled if t["state"] == "offline"),
    }


async def overview(request: Request) -> Response:
    history: History = request.app.state.history
    context = {
        **await _status(request),
        "charts": CHARTS,
        "sampler_error": history.last_error,
        "interval_s": history.interval_s,
    }
    return render(request, "overview/index.html", context)


async def status_fragment(request: Request) -> Response:
    """Stats, brokers and troubled partitions alone: htmx polls them every 5 s."""
    return render(request, "overview/_status.html", await _status(request))


async def history_json(request: Request) -> Response:
    """The sampler's series the charts draw: {"series": {name: [[unix_s, value], ...]}},
    only those the signed-in key may see (console/rights.py); 401 when not signed in."""
    history: History = request.app.state.history
    try:
        may = await rights(request)
    except ConsoleApiError as exc:
        return json_error(exc)
    wanted = request.query_params.get("series", "")
    asked = [n for n in wanted.split(",") if n] or history.names()
    names = [n for n in asked if may.may_see(n)]
    return JSONResponse(
        {
            "window_s": history.window_s,
            "interval_s": history.interval_s,
            "series": {n: history.series(n) for n in names},
        }
    )


PAGE = Page(
    name="overview",
    title="Overview",
    path="/",
    routes=[
        Route("/", overview, methods=["GET"]),
        Route("/overview/status", status_fragment, methods=["GET"]),
        Route("/history.json", history_json, methods=["GET"]),
    ],
)
