"""The worker roles' tiny HTTP server (tiering, compaction): /metrics and a /healthz that
fails when the worker's loop stops beating."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest


class Health:
    """The worker loop beats; /healthz fails when it has not for `stale_s`."""

    def __init__(self, stale_s: float) -> None:
        self.stale_s = stale_s
        self.last = time.monotonic()

    def beat(self) -> None:
        self.last = time.monotonic()

    def ok(self) -> bool:
        return time.monotonic() - self.last < self.stale_s


def serve_metrics(host: str, port: int, health: Health) -> ThreadingHTTPServer:
    """Serve /metrics and /healthz on a daemon thread; returns the server (shutdown() it)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._reply(200, generate_latest(), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                good = health.ok()
                self._reply(200 if good else 503, b"ok\n" if good else b"stalled\n", "text/plain")
            else:
                self._reply(404, b"not found\n", "text/plain")

        def _reply(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # scrapes every few seconds would drown the structured log

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="tiering-metrics", daemon=True).start()
    return server
