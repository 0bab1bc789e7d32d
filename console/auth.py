"""Sign-in, sessions and CSRF protection.

Signing in checks the API key against the cluster and opens a server-side session
(console/sessions.py): the browser's HttpOnly, SameSite=Strict cookie holds only the
session's opaque id, never the key; signing out ends the session.

Every form carries a CSRF token (and htmx sends it as the X-CSRF-Token header): an HMAC,
under the console's secret, of a random nonce kept in a cookie of its own, so a page that
cannot read our cookies cannot forge it."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from console.cluster_api import ConsoleApiError
from console.sessions import SessionStore

SESSION_COOKIE = "tierlog_console_session"
NONCE_COOKIE = "tierlog_console_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
MAX_KEY_CHARS = 512
MAX_FORM_BYTES = 64 * 1024


def api_key(request: Request) -> str | None:
    """The signed-in user's API key, from their session (None: not signed in, or the
    session ended or expired)."""
    sessions: SessionStore = request.app.state.sessions
    return sessions.api_key(request.cookies.get(SESSION_COOKIE))


def _nonce(request: Request) -> str:
    """The browser's CSRF nonce; a new one (set on the response by the middleware) if it has
    none yet."""
    nonce = request.cookies.get(NONCE_COOKIE) or request.scope.get("console.new_nonce")
    if not nonce:
        nonce = secrets.token_urlsafe(24)
        request.scope["console.new_nonce"] = nonce
    return str(nonce)


def csrf_token(request: Request) -> str:
    secret: bytes = request.app.state.secret
    return hmac.new(secret, _nonce(request).encode(), hashlib.sha256).hexdigest()


def _check_token(request: Request, sent: str | None) -> None:
    nonce = request.cookies.get(NONCE_COOKIE)
    if not nonce or not sent or not hmac.compare_digest(sent, csrf_token(request)):
        raise HTTPException(403, "INVALID_CSRF_TOKEN: the form is stale; reload the page")


async def checked_form(request: Request) -> FormData:
    """The form of a state-changing request, after its CSRF token (field or header) checks."""
    declared = request.headers.get("content-length", "")
    if not declared.isdigit() or int(declared) > MAX_FORM_BYTES:
        why = f"a form needs a Content-Length of at most {MAX_FORM_BYTES} bytes"
        raise HTTPException(413, f"INVALID_REQUEST: {why}")
    form = await request.form(max_files=0, max_fields=100)
    field = form.get(CSRF_FIELD)
    sent = request.headers.get(CSRF_HEADER) or (field if isinstance(field, str) else None)
    _check_token(request, sent)
    return form


def set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(
        name,
        value,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


def store_nonce(request: Request, response: Response) -> None:
    """Sets the nonce cookie when this request made one (its page holds tokens for it)."""
    nonce = request.scope.get("console.new_nonce")
    if nonce and not request.cookies.get(NONCE_COOKIE):
        set_cookie(response, request, NONCE_COOKIE, str(nonce))


# The sign-in pages render through console.render, which imports this module for the
# tokens: they import it when called.


async def login_page(request: Request) -> Response:
    from console.render import render

    return render(request, "login.html", {"error": None, "next": _next(request)})


def _next(request: Request) -> str:
    return same_origin_path(request.query_params.get("next", "/"))


# Characters a same-origin path may keep as they are; anything else is percent-encoded.
_PATH_SAFE = "/?=&%-._~!$'()*+,;:@"


def same_origin_path(target: str) -> str:
    """`target` if it is a path of this site, else "/". An open redirect would let a link
    send a signed-in user elsewhere: browsers read `//host`, `/\\host` and `https:host` as
    another origin, and drop tabs and newlines inside a URL (so `/<TAB>/host` is `//host`);
    CR/LF would also split the Location/HX-Redirect header. The path is re-encoded so what
    goes out is plain ASCII."""
    if (
        not target.startswith("/")
        or target.startswith("//")
        or "\\" in target
        or any(ord(c) < 0x21 or ord(c) == 0x7F for c in target)
    ):
        return "/"
    return quote(target, safe=_PATH_SAFE)


async def login(request: Request) -> Response:
    from console import forms

    form = await checked_form(request)
    key = str(form.get("api_key", "")).strip()
    error: ConsoleApiError | None = None
    if not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
        error = ConsoleApiError("INVALID_REQUEST", "enter an API key (tlk_…)", 400)
    else:
        try:  # a key the cluster refuses is not stored
            await request.app.state.api.get("/topics", key)
        except ConsoleApiError as exc:
            if exc.status in (401, 502, 504):
                error = exc
    if error is not None:
        ctx: dict[str, Any] = {"next": _next(request)}
        return forms.rejected(request, "_login_form.html", "login.html", ctx, error)
    sessions: SessionStore = request.app.state.sessions
    sessions.end(request.cookies.get(SESSION_COOKIE))  # a new session id on every sign-in
    response = forms.redirect(request, _next(request))
    set_cookie(response, request, SESSION_COOKIE, sessions.create(key))
    return response


async def logout(request: Request) -> Response:
    await checked_form(request)
    sessions: SessionStore = request.app.state.sessions
    sessions.end(request.cookies.get(SESSION_COOKIE))  # the old cookie stops working
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


routes = [
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
