"""Whether the cluster the console talks to requires API keys (issue 27 S6): a node run with
auth off (`tierlog dev` without --auth, --insecure) serves an OpenAPI document with no
security requirement, which needs no key to read. The answer is kept for a while, so pages
do not ask on every request; None while unknown (the cluster could not be asked)."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Receive, Scope, Send

from console.cluster_api import ClusterApi, ConsoleApiError

RECHECK_S = 30.0
FAILED_RECHECK_S = 5.0


class ClusterAuth:
    def __init__(self, api: ClusterApi, recheck_s: float = RECHECK_S) -> None:
        self.api = api
        self.recheck_s = recheck_s
        self.required: bool | None = None
        self._checked_at = float("-inf")

    async def refresh(self) -> bool | None:
        if time.monotonic() - self._checked_at < self.recheck_s:
            return self.required
        try:
            doc = await self.api.get("/openapi.json", None)
        except ConsoleApiError:
            # Keep what was known; ask again soon (not on every page of a cluster that is down).
            self._checked_at = time.monotonic() - self.recheck_s + FAILED_RECHECK_S
            return self.required
        self.required = bool(isinstance(doc, dict) and doc.get("security"))
        self._checked_at = time.monotonic()
        return self.required


class AuthProbe:
    """ASGI middleware: refreshes app.state.cluster_auth before a page is rendered."""

    def __init__(self, app: ASGIApp, auth: ClusterAuth) -> None:
        self.app, self.auth = app, auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(("/static/", "/healthz")):
            await self.auth.refresh()
        await self.app(scope, receive, send)
