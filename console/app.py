"""The console's app factory: the pages (console/pages), sign-in, static assets, the
metric sampler, and the headers every answer carries (a strict Content-Security-Policy:
scripts and styles of this origin only, no inline script)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from console import auth
from console.cluster_api import ClusterApi, ConsoleApiError
from console.cluster_auth import AuthProbe, ClusterAuth
from console.history import History, Sampler
from console.pages import pages
from console.render import render_error
from console.rights import RightsCache
from console.sessions import SessionStore

log = logging.getLogger("tierlog.console")

STATIC = Path(__file__).parent / "static"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]


class SecurityHeaders:
    """Adds the CSP and its companions to every HTTP answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def healthz(request: Request) -> Response:
    """Serving (what `tierlog dev` and a container's health check wait for)."""
    return JSONResponse({"status": "ok"})


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ConsoleApiError)
    if exc.needs_login:
        target = f"/login?next={quote(request.url.path)}"
        if request.headers.get("hx-request"):  # htmx follows this header, not a 3xx
            return Response(status_code=204, headers={"HX-Redirect": target})
        return RedirectResponse(target, status_code=303)
    return render_error(request, exc, exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    name, _, message = str(exc.detail).partition(": ")
    if not message:
        name, message = ("NOT_FOUND" if exc.status_code == 404 else "INVALID_REQUEST"), name
    return render_error(request, ConsoleApiError(name, message, exc.status_code), exc.status_code)


async def _server_error(request: Request, exc: Exception) -> Response:
    log.error("console request failed: %s %s", request.method, request.url.path, exc_info=exc)
    error = ConsoleApiError("UNKNOWN_SERVER_ERROR", f"the console failed: {exc}", 500)
    return render_error(request, error, 500)


def create_app(
    broker_url: str,
    *,
    secret: bytes | None = None,
    verify: str | bool = True,
    sampler_api_key: str | None = None,
    sample_interval_s: float = 5.0,
    sessions: SessionStore | None = None,
) -> Starlette:
    """`broker_url`: any node of the cluster. `secret` signs CSRF tokens (random per process
    unless given: a restart then asks open forms to reload). `sampler_api_key` lets the
    metric sampler list brokers when the cluster requires keys. `sessions`: the sign-in
    sessions and their lifetimes (console/sessions.py's defaults unless given)."""
    api = ClusterApi(broker_url, verify=verify)
    history = History(window_s=3600.0, interval_s=sample_interval_s)
    sampler = Sampler(api, history, sampler_api_key)
    page_list = pages()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(sampler.run())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await api.aclose()

    routes: list[BaseRoute] = [
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", healthz, methods=["GET"]),
        *auth.routes,
    ]
    for page in page_list:
        routes.extend(page.routes)
        for make_source in page.sources:
            sampler.add_source(make_source(sampler))
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            ConsoleApiError: _api_error,
            HTTPException: _http_error,
            Exception: _server_error,
        },
    )
    app.state.api = api
    app.state.history = history
    app.state.sampler = sampler
    app.state.pages = page_list
    app.state.secret = secret or secrets.token_bytes(32)
    app.state.sessions = sessions or SessionStore()
    app.state.rights = RightsCache()
    app.state.cluster_auth = ClusterAuth(api)
    app.add_middleware(AuthProbe, auth=app.state.cluster_auth)
    app.add_middleware(SecurityHeaders)
    return app
