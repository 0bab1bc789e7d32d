"""Request counts and latencies per route, as one pure ASGI middleware (cheaper than
BaseHTTPMiddleware on the produce hot path); brokers and fetch nodes alike."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cluster import metrics


class RequestMetrics:
    """Pure ASGI middleware (cheaper than BaseHTTPMiddleware on the produce hot path)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [500]

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", "unmatched")
            metrics.REQUESTS.labels(name, scope["method"], str(status[0])).inc()
            metrics.REQUEST_SECONDS.labels(name).observe(time.perf_counter() - start)
