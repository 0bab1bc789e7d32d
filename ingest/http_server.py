"""The uvicorn server that brokers and fetch nodes run their app on."""

from __future__ import annotations

import uvicorn
from starlette.types import ASGIApp

from ingest.http_guard import HttpLimits, guarded_protocol


def run_server(
    app: ASGIApp,
    host: str,
    port: int,
    tls_cert: str | None,
    tls_key: str | None,
    limits: HttpLimits,
) -> None:
    """Serve until SIGINT / SIGTERM. Our own JSON logs replace uvicorn's (log_config=None,
    no access log: /metrics counts requests); the connection cap bounds sockets and tasks,
    and the guarded protocol bounds headers, slow and idle connections (ingest/http_guard.py)."""
    uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            http=guarded_protocol(limits),
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
            limit_concurrency=limits.max_connections,
            ssl_certfile=tls_cert,
            ssl_keyfile=tls_key,
        )
    ).run()
