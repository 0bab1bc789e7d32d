"""Signing in to a console process over plain HTTP (no browser): the login page's CSRF
token and nonce cookie, then the login form, as a browser would send them."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import httpx

from http_transport.trust import default_trust

SESSION_COOKIE = "tierlog_console_session"


def csrf_token(client: httpx.Client, path: str = "/login") -> str:
    """A CSRF token from a rendered page (which also sets the nonce cookie it is made from)."""
    page = client.get(path)
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
    assert found is not None, page.text[:500]
    return found.group(1)


def post_login(
    client: httpx.Client, key: str, query: str = "", htmx: bool = False
) -> httpx.Response:
    """POST /login{query} with `key`; `query` is sent as written (e.g. "?next=/%5Cx")."""
    token = csrf_token(client)
    headers = {"hx-request": "true"} if htmx else {}
    return client.post(
        f"/login{query}", data={"csrf_token": token, "api_key": key}, headers=headers
    )


@contextlib.contextmanager
def signed_in(console_url: str, key: str) -> Iterator[httpx.Client]:
    """A client of the console holding a session for `key`."""
    with httpx.Client(verify=default_trust(), base_url=console_url, timeout=30) as client:
        r = post_login(client, key)
        assert r.status_code == 303 and r.headers["location"] == "/", r.text
        assert client.cookies.get(SESSION_COOKIE), r.headers
        yield client
