"""Security: API keys (create shows the secret once; revoke), ACLs (add, remove, what a
principal may do), client quotas. Every change is a CSRF-checked form the cluster's own
security API carries out with the signed-in user's key (cluster ALTER; looking needs DESCRIBE).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from console import auth
from console.cluster_api import ClusterApi, ConsoleApiError
from console.page import Page
from console.render import render

ACL_FIELDS = (
    "principal",
    "resource_type",
    "pattern_type",
    "resource_name",
    "operation",
    "permission",
)
RESOURCE_TYPES = ("topic", "group", "cluster")
OPERATIONS = ("read", "write", "create", "delete", "alter", "describe", "all")
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate")


async def _section(call: Any) -> tuple[Any, ConsoleApiError | None]:
    """One section's data, or the API's refusal to show it beside the others."""
    try:
        return await call, None
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        return None, exc


async def _page(request: Request, extra: dict[str, Any]) -> Response:
    api: ClusterApi = request.app.state.api
    key = auth.api_key(request)
    principal = request.query_params.get("principal", "").strip()
    (
        (keys, keys_error),
        (acls, acls_error),
        (quotas, quotas_error),
        (rights, rights_error),
    ) = await asyncio.gather(
        _section(api.get("/security/keys", key)),
        _section(api.get("/acls", key)),
        _section(api.get("/quotas", key)),
        _section(api.get("/acls/principal", key, principal=principal)) if principal else _none(),
    )
    context = {
        "active": "security",
        "keys": (keys or {}).get("keys", []),
        "keys_error": keys_error,
        "acls": (acls or {}).get("acls", []),
        "acls_error": acls_error,
        "quotas": (quotas or {}).get("quotas", []),
        "quotas_error": quotas_error,
        "principal": principal,
        "rights": rights,
        "rights_error": rights_error,
        "acl_fields": ACL_FIELDS,
        "resource_types": RESOURCE_TYPES,
        "operations": OPERATIONS,
        "quota_keys": QUOTA_KEYS,
        "notice": request.query_params.get("notice"),
        "new_key": None,
        "error": None,
        **extra,
    }
    return render(request, "security/index.html", context)


async def _none() -> tuple[None, None]:
    return None, None


async def security(request: Request) -> Response:
    return await _page(request, {})


def _done(notice: str) -> Response:
    return RedirectResponse(f"/security?{urlencode({'notice': notice})}", status_code=303)


def _text(form: FormData, name: str) -> str:
    value = form.get(name, "")
    return value.strip() if isinstance(value, str) else ""


Change = Callable[[ClusterApi, str | None, FormData], Awaitable[Response]]


async def _change(request: Request, form: FormData, change: Change) -> Response:
    """Run one change; an API refusal re-renders the page with it, by name and message."""
    try:
        return await change(request.app.state.api, auth.api_key(request), form)
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        # 200: the page itself is fine, the error is shown in it (as on the Groups page)
        return await _page(request, {"error": exc})


async def create_key(request: Request) -> Response:
    """Rendered, not redirected: the secret is shown on this one page and nowhere else (never
    in a URL, a log or a later page)."""
    form = await auth.checked_form(request)

    async def change(api: ClusterApi, key: str | None, form: FormData) -> Response:
        body = {"user": _text(form, "user"), "description": _text(form, "description") or None}
        made = await api.post("/security/keys", key, body)
        return await _page(request, {"new_key": made})

    return await _change(request, form, change)


async def revoke_key(request: Request) -> Response:
    form = await auth.checked_form(request)
    key_id = request.path_params["key_id"]

    async def change(api: ClusterApi, key: str | None, form: FormData) -> Response:
        done = await api.delete(f"/security/keys/{quote(key_id, safe='')}", key)
        return _done(f"Revoked key {key_id} of {done['principal']}.")

    return await _change(request, form, change)


async def add_acl(request: Request) -> Response:
    form = await auth.checked_form(request)

    async def change(api: ClusterApi, key: str | None, form: FormData) -> Response:
        binding = {f: _text(form, f) for f in ACL_FIELDS}
        done = await api.post("/acls", key, binding)
        verb = "Added" if done.get("created") else "Already present:"
        return _done(f"{verb} {_acl_text(binding)}.")

    return await _change(request, form, change)


async def remove_acl(request: Request) -> Response:
    form = await auth.checked_form(request)

    async def change(api: ClusterApi, key: str | None, form: FormData) -> Response:
        binding = {f: _text(form, f) for f in ACL_FIELDS}
        await api.request("DELETE", "/acls", key, params=binding)
        return _done(f"Removed {_acl_text(binding)}.")

    return await _change(request, form, change)


def _acl_text(b: dict[str, str]) -> str:
    return (
        f"{b['permission']} {b['principal']} {b['operation']} on {b['resource_type']} "
        f"{b['resource_name']}{' (prefix)' if b['pattern_type'] == 'prefixed' else ''}"
    )


def _rate(form: FormData, name: str) -> int | None:
    text = _text(form, name)
    if not text:
        return None
    if not text.isdigit():
        raise ConsoleApiError("INVALID_CONFIG", f"{name} must be a whole number of bytes/s", 400)
    return int(text)


async def set_quota(request: Request) -> Response:
    form = await auth.checked_form(request)

    async def change(api: ClusterApi, key: str | None, form: FormData) -> Response:
        entity = _text(form, "entity")
        rates = {k: _rate(form, k) for k in QUOTA_KEYS}
        if all(v is None for v in rates.values()):
            raise ConsoleApiError("INVALID_CONFIG", "give at least one rate", 400)
        body = {k: v for k, v in rates.items() if v is not None}
        await api.request("PUT", f"/quotas/{quote(entity, safe='')}", key, json=body)
        return _done(f"Set the quota of {entity}.")

    return await _change(request, form, change)


async def remove_quota(request: Request) -> Response:
    form = await auth.checked_form(request)

    async def change(api: ClusterApi, key: str | None, form: FormData) -> Response:
        entity = _text(form, "entity")
        await api.delete(f"/quotas/{quote(entity, safe='')}", key)
        return _done(f"Removed the quota of {entity}.")

    return await _change(request, form, change)


PAGE = Page(
    name="security",
    title="Security",
    path="/security",
    routes=[
        Route("/security", security, methods=["GET"]),
        Route("/security/keys", create_key, methods=["POST"]),
        Route("/security/keys/{key_id}/revoke", revoke_key, methods=["POST"]),
        Route("/security/acls/add", add_acl, methods=["POST"]),
        Route("/security/acls/remove", remove_acl, methods=["POST"]),
        Route("/security/quotas/set", set_quota, methods=["POST"]),
        Route("/security/quotas/remove", remove_quota, methods=["POST"]),
    ],
)
