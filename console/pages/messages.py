"""Messages: browse a partition or all partitions from the beginning, the end, an offset or
a time; live tail; search by key, value substring or JSON field across both tiers (the
cluster's GET /topics/{topic}/search, streamed to the page with its progress, cap and
cancel); a key's history (a key search over every offset). Values written by a Schema
Registry serializer show decoded, with their schema (console/registry_view.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from console import auth, erase_form
from console.cluster_api import ConsoleApiError
from console.message_view import (
    BINARY_FORMATS,
    MAX_LIMIT,
    POSITIONS,
    Browse,
    browse,
    decode_key_b64,
    decode_nexts,
    encode_nexts,
    parse_time,
    record_view,
    tail,
)
from console.page import Page
from console.produce_form import produce
from console.registry_view import decode_values
from console.render import render, render_fragment
from console.topic_details import topic_path

SEARCH_MODES = ("key", "key_b64", "value", "json")
DEFAULT_CAP = 100
HISTORY_CAP = 10_000


def _int(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not lo <= int(raw) <= hi:
        raise ConsoleApiError("INVALID_REQUEST", f"{name} must be a number in [{lo}, {hi}]", 400)
    return int(raw)


def _choice(request: Request, name: str, choices: tuple[str, ...]) -> str:
    raw = request.query_params.get(name) or choices[0]
    if raw not in choices:
        raise ConsoleApiError("INVALID_REQUEST", f"{name} must be one of {', '.join(choices)}", 400)
    return raw


def _partition(request: Request, count: int) -> int | None:
    raw = request.query_params.get("partition", "")
    if raw in ("", "all"):
        return None
    return _int(request, "partition", 0, 0, max(0, count - 1))


async def messages(request: Request, topic: str | None = None) -> Response:
    api, key = request.app.state.api, auth.api_key(request)
    listing = await api.get("/topics", key)
    names = sorted(t["name"] for t in listing.get("topics", []))
    topic = topic or request.query_params.get("topic") or (names[0] if names else "")
    binary = _choice(request, "binary", BINARY_FORMATS)
    ctx: dict[str, Any] = {
        "active": "messages",
        "topics": names,
        "topic": topic,
        "binary": binary,
        "partitions": [],
        "q": dict(request.query_params),
        "rows": [],
        "error": None,
        "nexts": "",
        "search": _search_defaults(request),
        # The produce form: where the last record went, or its error and what was typed.
        "produced": request.query_params.get("produced"),
        "produce_error": getattr(request.state, "produce_error", None),
        "typed": getattr(request.state, "produce_typed", {}),
    }
    if not topic:
        return render(request, "messages/index.html", ctx)
    try:
        desc = await api.get(topic_path(topic), key)
        count = len(desc["partitions"])
        ctx["partitions"] = list(range(count))
        b = Browse(
            topic,
            _partition(request, count),
            _choice(request, "position", POSITIONS),
            _int(request, "offset", 0, 0, 2**63 - 1),
            parse_time(request.query_params["timestamp"])
            if request.query_params.get("timestamp")
            else None,
            _int(request, "limit", 50, 1, MAX_LIMIT),
        )
        if b.position == "timestamp" and b.timestamp is None:
            raise ConsoleApiError("INVALID_REQUEST", "browsing from a time needs the time", 400)
        parts = ctx["partitions"] if b.partition is None else [b.partition]
        ctx["rows"], nexts = await browse(api, key, b, parts, binary)
        await decode_values(request, ctx["rows"])
        ctx["nexts"] = encode_nexts(nexts)
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        ctx["error"] = exc
    return render(request, "messages/index.html", ctx)


def _search_defaults(request: Request) -> dict[str, Any]:
    """The search form's values: a key's history link fills it in and starts it."""
    q = request.query_params
    history = q.get("history_key_b64") or q.get("history_key")
    if history:
        mode = "key_b64" if q.get("history_key_b64") else "key"
        return {"mode": mode, "text": history, "cap": HISTORY_CAP, "autostart": True}
    return {"mode": "key", "text": "", "cap": DEFAULT_CAP, "autostart": False}


async def tail_rows(request: Request) -> Response:
    """The records after `next` (partition:offset,...), as table rows; X-Next says where
    the next poll starts."""
    api, key = request.app.state.api, auth.api_key(request)
    topic = request.query_params.get("topic", "")
    binary = _choice(request, "binary", BINARY_FORMATS)
    rows, nexts = await tail(
        api, key, topic, decode_nexts(request.query_params.get("next", "")), binary
    )
    await decode_values(request, rows)
    html = render_fragment("messages/_rows.html", {"rows": rows, "topic": topic})
    return HTMLResponse(html, headers={"X-Next": encode_nexts(nexts), "Cache-Control": "no-store"})


def _search_params(request: Request) -> tuple[str, dict[str, Any]]:
    q = request.query_params
    topic = q.get("topic", "")
    if not topic:
        raise ConsoleApiError("INVALID_REQUEST", "choose a topic to search", 400)
    mode = _choice(request, "mode", SEARCH_MODES)
    text = q.get("text", "")
    params: dict[str, Any] = {
        "value_format": "base64",
        "max_hits": _int(request, "max_hits", DEFAULT_CAP, 1, HISTORY_CAP),
    }
    if mode == "json":
        params["json_path"], params["json_value"] = q.get("json_path", ""), text
    elif mode == "key_b64":
        params["key_b64"] = decode_key_b64(text)
    else:
        params[mode] = text
    for name in ("partition", "start_offset", "end_offset"):
        if q.get(name, "") not in ("", "all"):
            params[name] = q[name]
    for name in ("start_time", "end_time"):
        if q.get(name):
            params[name.replace("time", "timestamp")] = parse_time(q[name])
    return topic, params


async def search(request: Request) -> Response:
    """The cluster's search, relayed as NDJSON for static/messages.js: hits come as the
    table rows the page shows; progress, errors and the closing line as they are."""
    binary = _choice(request, "binary", BINARY_FORMATS)
    try:
        topic, params = _search_params(request)
    except ConsoleApiError as exc:
        return Response(_error_line(exc), media_type="application/x-ndjson")
    lines = request.app.state.api.stream_lines(
        topic_path(topic, "search"), auth.api_key(request), params
    )
    return StreamingResponse(
        _relay(request, lines, topic, binary),
        media_type="application/x-ndjson",
        headers={"Cache-Control": "no-store"},
    )


async def _relay(
    request: Request, lines: AsyncIterator[dict[str, Any]], topic: str, binary: str
) -> AsyncIterator[bytes]:
    try:
        async for doc in lines:
            if doc.get("type") == "hit":
                row = record_view(doc, int(doc["partition"]), binary)
                await decode_values(request, [row])
                html = render_fragment("messages/_rows.html", {"rows": [row], "topic": topic})
                doc = {"type": "hit", "tier": doc.get("tier"), "html": html}
            yield orjson.dumps(doc) + b"\n"
    except ConsoleApiError as exc:
        yield _error_line(exc)


def _error_line(exc: ConsoleApiError) -> bytes:
    return orjson.dumps({"type": "error", "error_code": exc.name, "message": exc.message}) + b"\n"


async def _produce(request: Request) -> Response:
    return await produce(request, messages)


PAGE = Page(
    name="messages",
    title="Messages",
    path="/messages",
    routes=[
        Route("/messages", messages, methods=["GET"]),
        Route("/messages/tail", tail_rows, methods=["GET"]),
        Route("/messages/search", search, methods=["GET"]),
        Route("/messages/produce", _produce, methods=["POST"]),
        *erase_form.routes,
    ],
)
