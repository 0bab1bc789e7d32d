"""Every state-changing route of the console refuses a request without its CSRF token,
before it calls the cluster (none runs here: the check must come first)."""

from __future__ import annotations

import asyncio
import re

import httpx
from starlette.routing import Route

from console.app import create_app

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


def test_every_unsafe_route_needs_the_token() -> None:
    asyncio.run(_check())


async def _check() -> None:
    app = create_app("http://127.0.0.1:9")
    # ASGITransport runs no lifespan: the sampler does not start.
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
        await _unsafe_routes_refuse(app, client)
        await _a_rendered_token_passes(client)


async def _unsafe_routes_refuse(app: object, client: httpx.AsyncClient) -> None:
    unsafe = [
        (method, re.sub(r"\{[^}]+\}", "x", r.path))
        for r in app.routes  # type: ignore[attr-defined]
        if isinstance(r, Route)
        for method in (r.methods or set()) & UNSAFE
    ]
    assert ("POST", "/topics") in unsafe and ("POST", "/logout") in unsafe
    for method, path in unsafe:
        for token in ({}, {"csrf_token": "forged"}):
            r = await client.request(method, path, data=token)
            assert r.status_code == 403, (method, path, r.text)
            assert "INVALID_CSRF_TOKEN" in r.text


async def _a_rendered_token_passes(client: httpx.AsyncClient) -> None:
    # A page the console renders sets the nonce its tokens are made from; with both, it passes
    # the check (and then reaches the API, which is not running: a readable error).
    page = await client.get("/login")
    token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
    assert token is not None and "tierlog_console_csrf" in client.cookies
    r = await client.post("/login", data={"csrf_token": token.group(1), "api_key": "tlk_x"})
    assert r.status_code == 502 and "NETWORK_EXCEPTION" in r.text
