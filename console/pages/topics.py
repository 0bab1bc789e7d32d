"""Topics: the list (partitions, records, hot and cold bytes, retention, tiering lag) with a
create form, and each topic's page (partitions with leader, replicas, ISR, hot and cold
ranges; its configs; grow; delete: console/topic_actions.py)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from console import auth, forms
from console.cluster_api import ConsoleApiError
from console.page import Page
from console.render import render
from console.topic_actions import action_routes
from console.topic_details import describe_all, summary, topic_context, topic_path

NUMBER_FIELDS = (("partitions", "Partitions"), ("replication_factor", "Replication factor"))


async def topic_list(request: Request) -> Response:
    topics = await describe_all(request.app.state.api, auth.api_key(request))
    return render(request, "topics/list.html", _list_context(request, topics))


def _list_context(request: Request, topics: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "active": "topics",
        "topics": [summary(t) for t in topics],
        "deleted": request.query_params.get("deleted"),
        "error": None,
        "form": {},
    }


async def create_topic(request: Request) -> Response:
    form = await auth.checked_form(request)
    values = {k: forms.text(form, k) for k in ("name", "partitions", "replication_factor")}
    values["retention_ms"] = forms.text(form, "retention_ms")
    try:
        body: dict[str, Any] = {"name": values["name"]}
        for field, label in NUMBER_FIELDS:
            number = forms.whole_number(form, field, label, "INVALID_REQUEST")
            if number is not None:
                body[field] = number
        if values["retention_ms"]:
            body["configs"] = {"retention.ms": values["retention_ms"]}
        await request.app.state.api.post("/topics", auth.api_key(request), body)
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        ctx: dict[str, Any] = {"active": "topics", "form": values, "topics": [], "deleted": None}
        if not forms.is_htmx(request):
            topics = await describe_all(request.app.state.api, auth.api_key(request))
            ctx = {**_list_context(request, topics), "form": values}
        return forms.rejected(request, "topics/_create_form.html", "topics/list.html", ctx, exc)
    return forms.redirect(request, f"{topic_path(values['name'])}?done=created")


async def topic_page(request: Request) -> Response:
    name = request.path_params["topic"]
    topic = await request.app.state.api.get(topic_path(name), auth.api_key(request))
    return render(request, "topics/topic.html", topic_context(request, topic))


async def partitions_fragment(request: Request) -> Response:
    """The partition table alone: htmx polls it to keep the page current."""
    name = request.path_params["topic"]
    topic = await request.app.state.api.get(topic_path(name), auth.api_key(request))
    return render(request, "topics/_partitions.html", topic_context(request, topic))


PAGE = Page(
    name="topics",
    title="Topics",
    path="/topics",
    routes=[
        Route("/topics", topic_list, methods=["GET"]),
        Route("/topics", create_topic, methods=["POST"]),
        Route("/topics/{topic}", topic_page, methods=["GET"]),
        Route("/topics/{topic}/partitions", partitions_fragment, methods=["GET"]),
        *action_routes,
    ],
)
