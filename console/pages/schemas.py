"""Schemas: the Schema Registry's subjects (latest version, type, compatibility level, the
topics that use each by TopicNameStrategy: `<topic>-value` and `<topic>-key`), and each
subject's page: its versions, two of them side by side with their differences marked, its
level. `/schemas?id=N` goes to the first subject version that registered schema N."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from console import auth
from console.cluster_api import ClusterApi, ConsoleApiError
from console.page import Page
from console.registry_view import REGISTRY, subject_path
from console.render import render

MAX_LISTED = 500  # subjects described on the list page (each costs two requests)
SUFFIXES = ("-value", "-key")


def topic_of(subject: str, topics: set[str]) -> str | None:
    """The topic a subject belongs to under TopicNameStrategy, if that topic exists."""
    for suffix in SUFFIXES:
        if subject.endswith(suffix) and subject[: -len(suffix)] in topics:
            return subject[: -len(suffix)]
    return None


async def _level(api: ClusterApi, key: str | None, subject: str | None) -> str:
    """The subject's compatibility level (the global one when it has none of its own)."""
    path = f"{REGISTRY}/config/{quote(subject, safe='')}" if subject else f"{REGISTRY}/config"
    answer = await api.get(path, key, defaultToGlobal="true")
    return str(answer.get("compatibilityLevel") or answer.get("compatibility") or "")


async def _topics(api: ClusterApi, key: str | None) -> set[str]:
    listing = await api.get("/topics", key)
    return {t["name"] for t in listing.get("topics", [])}


async def _summary(api: ClusterApi, key: str | None, subject: str, topics: set[str]) -> Any:
    latest, level = await asyncio.gather(
        api.get(subject_path(subject, "versions", "latest"), key), _level(api, key, subject)
    )
    return {
        "subject": subject,
        "version": latest.get("version"),
        "id": latest.get("id"),
        "type": latest.get("schemaType") or "AVRO",
        "level": level,
        "topic": topic_of(subject, topics),
    }


async def schema_list(request: Request) -> Response:
    api, key = request.app.state.api, auth.api_key(request)
    wanted = request.query_params.get("id", "").strip()
    if wanted:
        return await _to_schema(api, key, wanted)
    ctx: dict[str, Any] = {"active": "schemas", "subjects": [], "error": None, "more": 0}
    try:
        subjects = sorted(await api.get(f"{REGISTRY}/subjects", key))
        topics = await _topics(api, key)
        ctx["more"] = max(0, len(subjects) - MAX_LISTED)
        listed = subjects[:MAX_LISTED]
        ctx["subjects"] = await asyncio.gather(*(_summary(api, key, s, topics) for s in listed))
        ctx["level"] = await _level(api, key, None)
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        ctx["error"] = exc
    return render(request, "schemas/list.html", ctx)


async def _to_schema(api: ClusterApi, key: str | None, wanted: str) -> Response:
    if not wanted.isdigit():
        raise ConsoleApiError("INVALID_REQUEST", "id must be a schema id (a number)", 400)
    versions = await api.get(f"{REGISTRY}/schemas/ids/{int(wanted)}/versions", key)
    if not versions:
        raise ConsoleApiError("NOT_FOUND", f"schema {wanted} is in no subject", 404)
    first = versions[0]
    target = f"/schemas/{quote(first['subject'], safe='')}?right={first['version']}"
    return RedirectResponse(target, status_code=303)


def _pretty(answer: dict[str, Any]) -> list[str]:
    """A schema's text as lines to compare: JSON re-indented, .proto as written."""
    text = str(answer.get("schema", ""))
    if (answer.get("schemaType") or "AVRO") != "PROTOBUF":
        with contextlib.suppress(ValueError):  # shown as stored if it is not JSON
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return text.splitlines()


def side_by_side(left: list[str], right: list[str]) -> list[dict[str, Any]]:
    """Rows of a two-column diff: each (left line, right line) with how they differ."""
    rows: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        span = max(i2 - i1, j2 - j1)
        for k in range(span):
            i, j = i1 + k, j1 + k
            rows.append(
                {
                    "tag": tag,
                    "left_no": i + 1 if i < i2 else "",
                    "left": left[i] if i < i2 else "",
                    "right_no": j + 1 if j < j2 else "",
                    "right": right[j] if j < j2 else "",
                }
            )
    return rows


def _version(request: Request, name: str, default: int, versions: list[int]) -> int:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) not in versions:
        raise ConsoleApiError("INVALID_REQUEST", f"{name} must be one of the versions", 400)
    return int(raw)


async def subject_page(request: Request) -> Response:
    api, key = request.app.state.api, auth.api_key(request)
    subject = request.path_params["subject"]
    versions = list(await api.get(subject_path(subject, "versions"), key))
    right = _version(request, "right", versions[-1], versions)
    earlier = [v for v in versions if v < right]
    left = _version(request, "left", earlier[-1] if earlier else right, versions)
    left_doc, right_doc, level, topics = await asyncio.gather(
        api.get(subject_path(subject, "versions", str(left)), key),
        api.get(subject_path(subject, "versions", str(right)), key),
        _level(api, key, subject),
        _topics(api, key),
    )
    ctx = {
        "active": "schemas",
        "subject": subject,
        "versions": versions,
        "left": left_doc,
        "right": right_doc,
        "rows": side_by_side(_pretty(left_doc), _pretty(right_doc)),
        "level": level,
        "topic": topic_of(subject, topics),
    }
    return render(request, "schemas/subject.html", ctx)


PAGE = Page(
    name="schemas",
    title="Schemas",
    path="/schemas",
    routes=[
        Route("/schemas", schema_list, methods=["GET"]),
        Route("/schemas/{subject:path}", subject_page, methods=["GET"]),
    ],
)
