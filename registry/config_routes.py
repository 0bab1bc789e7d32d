"""Confluent's /config, /mode and /compatibility endpoints."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from registry.bodies import schema_request, setting
from registry.errors import INVALID_COMPATIBILITY_LEVEL, INVALID_MODE, not_permitted
from registry.http import Context, body, endpoint, require, require_cluster
from registry.levels import LEVELS, MODES
from registry.media import registry_json
from registry.params import LATEST, flag, subject_name, version_number

_KEYS = {"compatibility": "compatibilityLevel", "mode": "mode"}
_BODY_KEYS = {"compatibility": "compatibility", "mode": "mode"}
_ALLOWED = {"compatibility": (LEVELS, INVALID_COMPATIBILITY_LEVEL), "mode": (MODES, INVALID_MODE)}


def _subject(request: Request, operation: str) -> str | None:
    """The subject the path names (checked against its ACL), or None for the global one."""
    raw = request.path_params.get("subject")
    if raw is None:
        require_cluster(request, "alter" if operation == "alter" else "describe")
        return None
    subject = subject_name(raw)
    require(request, subject, operation)
    return subject


def setting_routes(ctx: Context, name: str) -> list[Route]:
    """GET/PUT/DELETE /{config|mode} and /{config|mode}/{subject}."""
    settings = ctx.registry.settings
    allowed, code = _ALLOWED[name]

    @endpoint
    async def get(request: Request) -> Response:
        subject = _subject(request, "read")
        to_global = flag(request.query_params.get("defaultToGlobal"))
        value = await ctx.run(settings.read, subject, name, to_global)
        return registry_json({_KEYS[name]: value})

    @endpoint
    async def put(request: Request) -> Response:
        subject = _subject(request, "alter")
        value = setting(await body(request), _BODY_KEYS[name], allowed, code)
        if name == "mode" and value == "IMPORT" and not flag(request.query_params.get("force")):
            await ctx.run(_importable, ctx, subject)
        await ctx.run(settings.write, subject, name, value)
        return registry_json({_BODY_KEYS[name]: value})

    @endpoint
    async def delete(request: Request) -> Response:
        subject = _subject(request, "alter")
        before = await ctx.run(settings.remove, subject, name)
        return registry_json({_KEYS[name]: before})

    path = f"/{name}" if name == "mode" else "/config"
    return [
        Route(path, get, methods=["GET"]),
        Route(path, put, methods=["PUT"]),
        Route(path, delete, methods=["DELETE"]),
        Route(path + "/{subject}", get, methods=["GET"]),
        Route(path + "/{subject}", put, methods=["PUT"]),
        Route(path + "/{subject}", delete, methods=["DELETE"]),
    ]


def _importable(ctx: Context, subject: str | None) -> None:
    """IMPORT over existing schemas needs `force=true` (Confluent's rule: imported ids could
    collide with the ones already given)."""
    store = ctx.registry.store
    existing = store.versions(subject) if subject else store.subjects(deleted=True)
    if existing:
        where = f"subject {subject}" if subject else "the registry"
        raise not_permitted(
            f"Cannot import since found existing subjects in {where}; use force=true to override"
        )


def compatibility_routes(ctx: Context) -> list[Route]:
    reg = ctx.registry

    @endpoint
    async def check(request: Request) -> Response:
        subject = subject_name(request.path_params["subject"])
        require(request, subject, "read")
        raw = request.path_params.get("version")
        number = None if raw is None else version_number(raw)
        req = schema_request(await body(request), tuple(reg.kinds))
        q = request.query_params
        cand = await ctx.run(reg.candidate, req, flag(q.get("normalize")))
        level = await ctx.run(reg.settings.compatibility, subject)
        live = [v for v in await ctx.run(reg.store.versions, subject) if not v.deleted]
        if number is not None and number != LATEST:
            live = [await ctx.run(reg.version, subject, number)]
            level = level.removesuffix("_TRANSITIVE")  # one named version: no history
        elif number == LATEST:
            live = live[-1:]
        messages = await ctx.run(reg.incompatibilities, cand, live, level)
        answer: dict[str, object] = {"is_compatible": not messages}
        if flag(q.get("verbose")):
            answer["messages"] = messages
        return registry_json(answer)

    base = "/compatibility/subjects/{subject}/versions"
    return [
        Route(base, check, methods=["POST"]),
        Route(base + "/{version}", check, methods=["POST"]),
    ]
