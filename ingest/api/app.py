"""The broker's Starlette application: its routes inside the node's middleware stack."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from cluster.http.admission import ConcurrencyMiddleware
from cluster.http.api_docs import docs_routes
from cluster.http.auth import AuthMiddleware
from cluster.http.cross_site import CrossSiteGuard, own_origins
from cluster.http.limits import limits_middleware
from cluster.http.request_metrics import RequestMetrics
from cluster.http.responses import exception_handlers
from ingest.api import (
    erasures,
    internal,
    ops,
    producers,
    records,
    search,
    security,
    topics,
    txn_internal,
)
from ingest.broker_config import broker_limits

if TYPE_CHECKING:
    from ingest.service.services import Services

log = logging.getLogger("tierlog.api")


def build_app(
    services: Services,
    lifespan: Callable[[Any], AbstractAsyncContextManager[None]] | None = None,
    extra_routes: Sequence[BaseRoute] = (),  # mounted by packages above ingest (extension.py)
) -> Starlette:
    app = Starlette(
        routes=[
            *topics.routes,
            *erasures.routes,
            *records.routes,
            *search.routes,
            *producers.routes,
            *security.routes,
            *ops.routes,
            *internal.routes,
            *txn_internal.routes,
            *docs_routes(),  # /docs: Swagger UI over /openapi.json, no key needed
            *extra_routes,
        ],
        exception_handlers=exception_handlers(log),
        lifespan=lifespan,
    )
    app.state.services = services
    # add_middleware puts each one outside the previous: auth must wrap whatever reads
    # scope["tierlog.principal"] (quotas), and request metrics wrap auth (401s are counted).
    cfg = services.config
    limits = broker_limits(cfg)  # quotas and overload protection (api/limits.py)
    # Added first, so innermost: inside auth, whose principal it reads.
    # The quota manager and long-poll slots are the broker's: its Kafka listener shares them.
    app.add_middleware(
        limits_middleware(
            limits,
            services.security.engine,  # unused: the quota manager is given
            services.cluster_secret,
            services.quotas,
            services.long_polls,
        )
    )
    # Searches and admin requests at once (K9): inside auth, whose principal it counts by.
    app.add_middleware(ConcurrencyMiddleware, limits=cfg.concurrency)
    app.add_middleware(AuthMiddleware, authorizer=services.security.authorizer)
    # Cross-site writes are refused before anything else runs.
    origins = own_origins([cfg.advertised_url], cfg.host, cfg.port, cfg.tls_cert is not None)
    app.add_middleware(CrossSiteGuard, origins=origins)
    app.add_middleware(RequestMetrics)
    return app
