"""The uvicorn server that brokers and fetch nodes run their app on."""

from __future__ import annotations

from collections.abc import Callable
from types import FrameType

import uvicorn
from starlette.types import ASGIApp

from cluster.http.guard import HttpLimits, guarded_protocol
from cluster.process_memory import return_freed_memory


class _Server(uvicorn.Server):
    """uvicorn's server, telling the node the moment a SIGINT / SIGTERM arrives: it stops
    serving before the app's shutdown runs, and the node may need to know (a broker stops
    shrinking ISRs then)."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None] | None) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._on_exit is not None:
            self._on_exit()
        super().handle_exit(sig, frame)


def run_server(
    app: ASGIApp,
    host: str,
    port: int,
    tls_cert: str | None,
    tls_key: str | None,
    limits: HttpLimits,
    on_exit: Callable[[], None] | None = None,
) -> None:
    """Serve until SIGINT / SIGTERM (`on_exit` is called when one arrives). Our own JSON logs
    replace uvicorn's (log_config=None, no access log: /metrics counts requests); the
    connection cap bounds sockets and tasks, and the guarded protocol bounds headers, slow and
    idle connections (cluster/http/guard.py). Big request bodies leave no memory behind once
    handled (cluster/process_memory.py)."""
    return_freed_memory()
    _Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            http=guarded_protocol(limits),
            ws="none",  # no WebSocket route anywhere; an upgrade is answered as plain HTTP
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
            limit_concurrency=limits.max_connections,
            ssl_certfile=tls_cert,
            ssl_keyfile=tls_key,
        ),
        on_exit,
    ).run()


def parse_listen(listen: str) -> tuple[str, int]:
    """'host:port' (or ':port') → (host, port); the host defaults to loopback."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen wants HOST:PORT, got {listen!r}")
    return (host or "127.0.0.1").strip("[]"), int(port)
