"""The Messages page's Erase action and the erasure audit list (issue 31): after a search
for a key, erase every record with it from both tiers (the cluster's POST
/topics/{t}/erasures with the signed-in key, behind typing the topic's name), then follow the
request in the topic's audit list (GET /topics/{t}/erasures)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from console import auth, forms
from console.cluster_api import ConsoleApiError
from console.render import render
from console.topic_details import topic_path

MAX_KEY_CHARS = 100_000


def body_of(key: str, binary: bool) -> dict[str, list[str]]:
    if not key:
        raise ConsoleApiError("INVALID_REQUEST", "enter the key to erase", 400)
    return {"keys_b64": [key]} if binary else {"keys": [key]}


def summary(doc: dict[str, Any]) -> dict[str, Any]:
    """One audit row: the request and what each tier removed."""
    hot = doc.get("hot", {}).values()
    cold = doc.get("cold", {}).values()
    return {
        **doc,
        "hot_removed": sum(r.get("records_removed", 0) for r in hot),
        "replicas": len(doc.get("hot", {})),
        "cold_removed": sum(r.get("records_removed", 0) for r in cold),
        "cold_files": sum(r.get("files_rewritten", 0) for r in cold),
        "cold_bytes": sum(r.get("bytes_rewritten", 0) for r in cold),
    }


async def erase(request: Request) -> Response:
    form = await auth.checked_form(request)
    topic = forms.text(form, "topic", 300)
    key = forms.text(form, "key", MAX_KEY_CHARS)
    try:
        if not topic:
            raise ConsoleApiError("INVALID_REQUEST", "choose a topic", 400)
        if forms.text(form, "confirm_name", 300) != topic:
            raise ConsoleApiError(
                "INVALID_REQUEST", f"type the topic's name, {topic}, to erase the key", 400
            )
        body = body_of(key, form.get("key_format") == "base64")
        doc = await request.app.state.api.post(
            topic_path(topic, "erasures"), auth.api_key(request), body
        )
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        ctx = {"active": "messages", "topic": topic, "rows": [], "error": exc, "key": key}
        return render(request, "messages/erasures.html", ctx, status_code=min(exc.status, 502))
    query = urlencode({"topic": topic, "made": doc["id"]})
    return forms.redirect(request, f"/messages/erasures?{query}")


async def erasures(request: Request) -> Response:
    topic = request.query_params.get("topic", "")
    ctx: dict[str, Any] = {
        "active": "messages",
        "topic": topic,
        "rows": [],
        "error": None,
        "made": request.query_params.get("made"),
    }
    if topic:
        try:
            doc = await request.app.state.api.get(
                topic_path(topic, "erasures"), auth.api_key(request)
            )
            ctx["rows"] = [summary(d) for d in doc.get("erasures", [])]
        except ConsoleApiError as exc:
            if exc.needs_login:
                raise
            ctx["error"] = exc
    return render(request, "messages/erasures.html", ctx)


routes = [
    Route("/messages/erase", erase, methods=["POST"]),
    Route("/messages/erasures", erasures, methods=["GET"]),
]
