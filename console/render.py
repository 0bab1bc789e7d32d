"""Jinja2 rendering: every page gets the nav (the page list), its CSRF token and whether a
key is signed in; API errors render as their name and message, never a trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse

from console import auth
from console.cluster_api import ConsoleApiError

TEMPLATES = Path(__file__).parent / "templates"

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=jinja2.select_autoescape(["html"]),
    undefined=jinja2.StrictUndefined,
)
_env.filters["urlpart"] = lambda s: quote(str(s), safe="")


def _bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _duration_ms(ms: Any) -> str:
    try:
        value = int(ms)
    except (TypeError, ValueError):
        return str(ms)
    if value < 0:
        return "forever"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if value >= size and value % size == 0:
            return f"{value // size} {unit}"
    return f"{value} ms"


_env.filters["bytes"] = _bytes
_env.filters["duration_ms"] = _duration_ms


def render(
    request: Request, template: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    ctx = {
        "request": request,
        "nav": request.app.state.pages,
        "csrf_token": auth.csrf_token(request),
        "signed_in": auth.api_key(request) is not None,
        # False: the cluster runs without auth (no key needed); None: not known yet.
        "auth_required": request.app.state.cluster_auth.required,
        "broker_url": request.app.state.api.base_url,
        "active": context.get("active", ""),
        **context,
    }
    response = HTMLResponse(_env.get_template(template).render(ctx), status_code=status_code)
    auth.store_nonce(request, response)
    return response


def render_error(request: Request, error: ConsoleApiError, status_code: int) -> HTMLResponse:
    """An API error as a page (or, for an htmx request, as the fragment it swaps in)."""
    if request.headers.get("hx-request"):
        html = _env.get_template("_error.html").render({"error": error})
        return HTMLResponse(html, status_code=200)  # htmx swaps only 2xx answers
    return render(request, "error.html", {"error": error}, status_code=status_code)


def render_fragment(template: str, context: dict[str, Any]) -> str:
    """A partial template (no page around it), for answers scripts insert into a page."""
    return _env.get_template(template).render(context)


def json_error(error: ConsoleApiError) -> JSONResponse:
    """An error of a JSON endpoint (the charts' data): its status, name and message; a
    missing sign-in is a 401 here, not a redirect a script would follow into a page."""
    body = {"error_code": error.name, "message": error.message}
    return JSONResponse(body, status_code=error.status)
