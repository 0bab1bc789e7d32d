"""What the topic page changes: configs (validated by the API, as PATCH does: its errors are
shown in the form), the partition count (grow only, as Kafka), and deletion behind a
confirmation step (type the topic's name)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from console import auth, forms
from console.cluster_api import ConsoleApiError
from console.render import render
from console.topic_details import topic_context, topic_path

CONFIG_PREFIX = "cfg."


async def _describe(request: Request) -> dict[str, Any]:
    name = request.path_params["topic"]
    doc: dict[str, Any] = await request.app.state.api.get(topic_path(name), auth.api_key(request))
    return doc


def _context(request: Request, topic: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**topic_context(request, topic), **extra}


def changed_configs(form: Any, current: dict[str, str]) -> dict[str, str | None]:
    """The configs whose field differs from the topic's value: an emptied field restores the
    default (null, as PATCH takes it). Fields of unknown names are ignored."""
    out: dict[str, str | None] = {}
    for name, value in current.items():
        sent = form.get(CONFIG_PREFIX + name)
        if not isinstance(sent, str):
            continue
        sent = sent.strip()
        if sent != value:
            out[name] = sent or None
    return out


async def alter_configs(request: Request) -> Response:
    form = await auth.checked_form(request)
    topic = await _describe(request)
    changes = changed_configs(form, topic["configs"])
    key = auth.api_key(request)
    try:
        if changes:
            path = topic_path(topic["name"], "configs")
            topic = await request.app.state.api.patch(path, key, {"configs": changes})
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        # Keep what the user typed, so the error is next to their value.
        typed = {**topic["configs"], **{k: v or "" for k, v in changes.items()}}
        ctx = _context(request, {**topic, "configs": typed})
        return forms.rejected(request, "topics/_configs.html", "topics/topic.html", ctx, exc)
    notice = f"Saved {', '.join(sorted(changes))}." if changes else "Nothing changed."
    if forms.is_htmx(request):
        return render(request, "topics/_configs.html", _context(request, topic, notice=notice))
    return forms.redirect(request, f"{topic_path(topic['name'])}?done=configs")


async def grow(request: Request) -> Response:
    form = await auth.checked_form(request)
    name = request.path_params["topic"]
    try:
        total = forms.whole_number(form, "partitions", "Partitions", "INVALID_PARTITIONS")
        if total is None:
            raise ConsoleApiError("INVALID_PARTITIONS", "enter the new number of partitions", 400)
        path = topic_path(name, "partitions")
        await request.app.state.api.post(path, auth.api_key(request), {"partitions": total})
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        ctx = _context(request, await _describe(request))
        return forms.rejected(request, "topics/_grow_form.html", "topics/topic.html", ctx, exc)
    return forms.redirect(request, f"{topic_path(name)}?done=grown")


async def confirm_delete(request: Request) -> Response:
    topic = await _describe(request)
    return render(request, "topics/delete.html", _context(request, topic))


async def delete(request: Request) -> Response:
    form = await auth.checked_form(request)
    name = request.path_params["topic"]
    try:
        if forms.text(form, "confirm_name", 300) != name:
            raise ConsoleApiError(
                "INVALID_REQUEST", f"type the topic's name, {name}, to delete it", 400
            )
        await request.app.state.api.delete(topic_path(name), auth.api_key(request))
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        ctx = _context(request, await _describe(request))
        return forms.rejected(request, "topics/_delete_form.html", "topics/delete.html", ctx, exc)
    return forms.redirect(request, f"/topics?deleted={quote(name, safe='')}")


action_routes = [
    Route("/topics/{topic}/configs", alter_configs, methods=["POST"]),
    Route("/topics/{topic}/partitions", grow, methods=["POST"]),
    Route("/topics/{topic}/delete", confirm_delete, methods=["GET"]),
    Route("/topics/{topic}/delete", delete, methods=["POST"]),
]
