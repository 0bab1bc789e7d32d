"""The uvicorn server that brokers and fetch nodes run their app on."""

from __future__ import annotations

import uvicorn
from starlette.types import ASGIApp

from cluster.http.guard import HttpLimits, guarded_protocol
from cluster.process_memory import return_freed_memory


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
    and the guarded protocol bounds headers, slow and idle connections (cluster/http/guard.py).
    Big request bodies leave no memory behind once handled (cluster/process_memory.py)."""
    return_freed_memory()
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


def parse_listen(listen: str) -> tuple[str, int]:
    """'host:port' (or ':port') → (host, port); the host defaults to loopback."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen wants HOST:PORT, got {listen!r}")
    return (host or "127.0.0.1").strip("[]"), int(port)
