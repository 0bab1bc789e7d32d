"""Consumer groups: the list; a group's members, assignment, committed offsets, lag per
partition in records and in time (the age of its oldest unconsumed record) with a trend chart
of the last hour; and offset resets, previewed (a dry run) before they are applied."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from console import auth
from console.cluster_api import ClusterApi, ConsoleApiError
from console.group_lag import chart_data, group_path, lag_source, record
from console.group_reset import FIELDS, TARGETS, reset_body
from console.page import Page
from console.render import json_error, render
from console.rights import rights

LIST_DESCRIBES = 100  # groups described for the list's lag columns (the rest show none)
NONE = "\u2013"  # an en dash: no value


def format_age(ms: int | None) -> str:
    """A lag in time for people: 850 ms, 12.3 s, 4 min 05 s, 2 h 03 min, 3 d 04 h."""
    if ms is None:
        return NONE
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    s = ms // 1000
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600:02d} h"


async def _describe(api: ClusterApi, key: str | None, name: str) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = await api.get(group_path(name), key)
    except ConsoleApiError:
        return None  # the list still shows the group; its page shows the error
    return doc


async def group_list(request: Request) -> Response:
    api: ClusterApi = request.app.state.api
    key = auth.api_key(request)
    groups = (await api.get("/groups", key)).get("groups", [])
    described = await asyncio.gather(
        *(_describe(api, key, g["name"]) for g in groups[:LIST_DESCRIBES])
    )
    for g, d in zip(groups, described, strict=False):
        g["lag"] = d.get("lag") if d else None
        g["lag_age"] = format_age(d.get("lag_ms")) if d else NONE
    return render(request, "groups/list.html", {"active": "groups", "groups": groups})


def _rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Offsets per partition, with the member that owns each."""
    owner = {
        (t, p): m["member_id"]
        for m in doc.get("members", [])
        for t, ps in (m.get("assignment") or {}).items()
        for p in ps
    }
    rows = []
    for o in doc.get("offsets", []):
        rows.append(
            {
                **o,
                "age": format_age(o.get("lag_ms")),
                "owner": owner.pop((o["topic"], o["partition"]), None),
            }
        )
    for (t, p), member in sorted(owner.items()):  # assigned, nothing committed or listed
        rows.append({"topic": t, "partition": p, "offset": None, "high_watermark": None,
                     "lag": None, "age": NONE, "owner": member})  # fmt: skip
    return rows


async def _group_page(
    request: Request, group: str, extra: dict[str, Any], status_code: int = 200
) -> Response:
    api: ClusterApi = request.app.state.api
    doc = await api.get(group_path(group), auth.api_key(request))
    record(request.app.state.history, group, doc, time.time())
    topics = sorted(
        {o["topic"] for o in doc.get("offsets", [])}
        | {t for m in doc.get("members", []) for t in m.get("topics", [])}
    )
    context = {
        "active": "groups",
        "group": doc,
        "rows": _rows(doc),
        "group_age": format_age(doc.get("lag_ms")),
        "topics": topics,
        "targets": TARGETS,
        "form": {f: "" for f in FIELDS} | {"to": "earliest"},
        "preview": None,
        "reset_error": None,
        "notice": request.query_params.get("notice"),
        **extra,
    }
    return render(request, "groups/detail.html", context, status_code=status_code)


async def group_detail(request: Request) -> Response:
    return await _group_page(request, request.path_params["group"], {})


async def lag_json(request: Request) -> Response:
    """The group's lag history, for a key that may describe the group (else 403; 401 when
    not signed in)."""
    group = request.path_params["group"]
    try:
        # A group newer than the cached rights is asked about once more before a 403.
        if group not in (await rights(request)).groups and (
            group not in (await rights(request, fresh=True)).groups
        ):
            why = "this API key may not describe the group (or there is no such group)"
            raise ConsoleApiError("GROUP_AUTHORIZATION_FAILED", why, 403)
    except ConsoleApiError as exc:
        return json_error(exc)
    return JSONResponse(chart_data(request.app.state.history, group))


async def reset(request: Request) -> Response:
    """action=preview: a dry run, shown with an Apply form; action=apply: the reset itself
    (the group must be empty: the API refuses with NON_EMPTY_GROUP otherwise)."""
    group = request.path_params["group"]
    form = await auth.checked_form(request)
    fields = {f: str(form.get(f, "")) for f in FIELDS}
    api: ClusterApi = request.app.state.api
    key = auth.api_key(request)
    try:
        partitions = None
        if fields["to"] == "offset" and not fields["partition"].strip() and fields["topic"]:
            topic_doc = await api.get("/topics/" + _quote(fields["topic"]), key)
            partitions = len(topic_doc.get("partitions", []))
        body = reset_body(fields, partitions)
        apply = form.get("action") == "apply"
        answer = await api.post(
            group_path(group) + "/offsets/reset", key, {**body, "dry_run": not apply}
        )
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        return await _group_page(request, group, {"form": fields, "reset_error": exc})
    rows = sorted(answer.get("offsets", []), key=lambda r: (r["topic"], r["partition"]))
    if apply:
        notice = f"Reset {len(rows)} partition(s) of {fields['topic']}."
        target = f"/groups/{_quote(group)}?notice={_quote(notice)}"
        return RedirectResponse(target, status_code=303)
    return await _group_page(request, group, {"form": fields, "preview": rows})


def _quote(text: str) -> str:
    return quote(text, safe="")


PAGE = Page(
    name="groups",
    title="Consumer groups",
    path="/groups",
    routes=[
        Route("/groups", group_list, methods=["GET"]),
        Route("/groups/{group:path}/lag.json", lag_json, methods=["GET"]),
        Route("/groups/{group:path}/reset", reset, methods=["POST"]),
        Route("/groups/{group:path}", group_detail, methods=["GET"]),
    ],
    sources=[lag_source],
)
