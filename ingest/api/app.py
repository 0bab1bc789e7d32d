"""The Starlette application: routes, Kafka-style error responses, request metrics."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ingest import metrics
from ingest.api import internal, ops, producers, records, topics
from ingest.api.auth import AuthMiddleware
from ingest.api.cross_site import CrossSiteGuard, own_origins
from ingest.api.http import exception_handlers
from ingest.api.limits import broker_limits, limits_middleware

if TYPE_CHECKING:
    from ingest.broker import Broker

log = logging.getLogger("tierlog.api")


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


def build_app(
    broker: Broker,
    lifespan: Callable[[Any], AbstractAsyncContextManager[None]] | None = None,
    extra_routes: Sequence[BaseRoute] = (),  # mounted by packages above ingest (extension.py)
) -> Starlette:
    app = Starlette(
        routes=[
            *topics.routes,
            *records.routes,
            *producers.routes,
            *ops.routes,
            *internal.routes,
            *extra_routes,
        ],
        exception_handlers=exception_handlers(log),
        lifespan=lifespan,
    )
    app.state.broker = broker
    # add_middleware puts each one outside the previous: auth must wrap whatever reads
    # scope["tierlog.principal"] (quotas), and request metrics wrap auth (401s are counted).
    limits = broker_limits(broker.config)  # quotas and overload protection (api/limits.py)
    # Added first, so innermost: inside auth, whose principal it reads.
    app.add_middleware(limits_middleware(limits, broker.engine, lambda: broker.cluster_secret))
    app.add_middleware(AuthMiddleware, authorizer=broker.authorizer)
    cfg = broker.config  # cross-site writes are refused before anything else runs
    origins = own_origins([cfg.advertised_url], cfg.host, cfg.port, cfg.tls_cert is not None)
    app.add_middleware(CrossSiteGuard, origins=origins)
    app.add_middleware(RequestMetrics)
    return app
