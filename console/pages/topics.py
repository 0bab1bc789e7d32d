"""Topics: the list (partitions, hot and cold bytes, records, retention, tiering lag)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from console import auth
from console.page import Page
from console.render import render
from console.topic_details import describe_all


async def topic_list(request: Request) -> Response:
    topics = await describe_all(request.app.state.api, auth.api_key(request))
    return render(request, "topics/list.html", {"active": "topics", "topics": topics})


PAGE = Page(
    name="topics",
    title="Topics",
    path="/topics",
    routes=[Route("/topics", topic_list, methods=["GET"])],
)
