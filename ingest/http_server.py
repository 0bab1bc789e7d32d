"""The uvicorn server that brokers and fetch nodes run their app on."""

from __future__ import annotations

import uvicorn
from starlette.types import ASGIApp


def run_server(
    app: ASGIApp, host: str, port: int, tls_cert: str | None, tls_key: str | None
) -> None:
    """Serve until SIGINT / SIGTERM. Our own JSON logs replace uvicorn's (log_config=None,
    no access log: /metrics counts requests); a connection cap bounds sockets and tasks."""
    uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
            limit_concurrency=4096,
            ssl_certfile=tls_cert,
            ssl_keyfile=tls_key,
        )
    ).run()
