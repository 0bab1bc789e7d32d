"""An HTTP proxy in front of an S3 endpoint (moto's server) that injects S3's failures.

    with FaultyS3Proxy(moto_s3.endpoint, error_rate=0.1, stall_rate=0.03, stall_s=3) as proxy:
        config = config_for(proxy.endpoint, bucket)   # clients talk to the proxy
        ...
        assert proxy.injected() > 0

Per request, at random (seeded):
- error (error_rate): answered at once with 500 InternalError or 503 SlowDown, S3's XML error
  body, and never forwarded: what S3 does under load, and what clients must retry.
- stall (stall_rate): held for stall_s (set it beyond the client's read timeout), then the
  connection is closed with no answer and nothing forwarded: a request lost in the network.
- lost response (lost_rate): forwarded, so it takes effect, then answered 500 anyway. The
  client retries an operation that already happened: idempotence is what makes this safe
  (a retried conditional PUT, for one, now gets 412 PreconditionFailed).
Everything else is forwarded unchanged (headers kept, Host included: SigV4 signs it).
`usage()` meters what was forwarded by S3's price classes (bench/cost.py reads it; with
`error_rate=0` the proxy is only a meter).

The proxy runs in a process of its own, as a real S3 endpoint does: in the test's process it
would compete for the GIL with the code under test, and a client call that holds the GIL
while it waits for S3 would wait for a proxy that cannot run. `set_enabled(False)` turns
faults off (setup, final checks); `counts()` says what was injected. Control requests go to
`/_faults` (never a bucket: bucket names cannot contain "_").
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

CONTROL_PATH = "/_faults"
# Hop-by-hop headers (RFC 9110 §7.6.1) and the ones the proxy recomputes itself.
_NOT_FORWARDED = frozenset(
    (
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
        "content-length",
    )
)
_ERRORS = (
    (500, "InternalError", "We encountered an internal error. Please try again."),
    (503, "SlowDown", "Please reduce your request rate."),
)


def error_body(code: str, message: str, resource: str) -> bytes:
    """An S3 error document, as S3 sends with a 4xx/5xx."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        f"<Resource>{resource}</Resource><RequestId>{uuid.uuid4().hex[:16].upper()}</RequestId>"
        f"<HostId>{uuid.uuid4().hex}</HostId></Error>"
    ).encode()


class FaultPlan:
    """Which fault, if any, each request gets (thread-safe), and what was injected."""

    def __init__(
        self, error_rate: float, stall_rate: float, lost_rate: float, seed: int | None
    ) -> None:
        if error_rate + stall_rate + lost_rate > 1:
            raise ValueError("fault rates add up to more than 1")
        self.error_rate, self.stall_rate, self.lost_rate = error_rate, stall_rate, lost_rate
        self.enabled = True
        self.counts: Counter[str] = Counter()
        self.usage: Counter[str] = Counter()  # forwarded requests by price class, and bytes
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def decide(self) -> str:
        with self._lock:
            kind = "forwarded"
            if self.enabled:
                x = self._rng.random()
                if x < self.error_rate:
                    kind = "error_500" if self._rng.random() < 0.5 else "error_503"
                elif x < self.error_rate + self.stall_rate:
                    kind = "stall"
                elif x < self.error_rate + self.stall_rate + self.lost_rate:
                    kind = "lost_response"
            self.counts[kind] += 1
            return kind

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def metered(self, method: str, path: str, sent: int, received: int) -> None:
        with self._lock:
            self.usage[price_class(method, path)] += 1
            self.usage["bytes_to_s3"] += sent
            self.usage["bytes_from_s3"] += received

    def usage_snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.usage)


def price_class(method: str, path: str) -> str:
    """S3's request price class (path-style URLs): "put" (PUT, COPY, POST, LIST), "get" (GET,
    HEAD and all other requests) or "delete" (free)."""
    if method == "DELETE":
        return "delete"
    if method in ("PUT", "POST"):
        return "put"
    url = urlparse(path)
    is_bucket = "/" not in url.path.strip("/")
    query = parse_qs(url.query, keep_blank_values=True)
    if method == "GET" and is_bucket and not {"location", "versioning", "policy"} & set(query):
        return "put"  # ListObjects(V2) and ListMultipartUploads are billed as LIST
    return "get"


class _Server(ThreadingHTTPServer):
    """The proxy's server: what its handlers share (the plan, the stall, the upstream)."""

    daemon_threads = True

    def __init__(self, upstream: str, plan: FaultPlan, stall_s: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        url = urlparse(upstream)
        self.upstream = (url.hostname or "127.0.0.1", url.port or 80)
        self.plan = plan
        self.stall_s = stall_s

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (its read timeout during a stall) is the point, not an error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _forward(
    upstream: tuple[str, int], method: str, path: str, headers: list[tuple[str, str]], body: bytes
) -> tuple[int, str, list[tuple[str, str]], bytes]:
    conn = http.client.HTTPConnection(*upstream, timeout=60)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers:
            if name.lower() not in _NOT_FORWARDED:
                conn.putheader(name, value)
        if body or method in ("PUT", "POST"):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body or None)
        resp = conn.getresponse()
        return resp.status, resp.reason, resp.getheaders(), resp.read()
    finally:
        conn.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and 100-continue for boto3's PUTs
    server: _Server

    def _body(self) -> bytes:
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunks = []
        while size := int(self.rfile.readline().split(b";")[0].strip(), 16):
            chunks.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(chunks)

    def _reply(self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status, reason)
        length = str(len(body))
        for name, value in headers:
            lower = name.lower()
            if lower == "content-length" and self.command == "HEAD":
                length = value  # a HEAD's length is the object's, with no body
            elif lower not in _NOT_FORWARDED and lower not in ("date", "server"):
                self.send_header(name, value)
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str) -> None:
        body = error_body(code, message, self.path.split("?")[0])
        self._reply(status, code, [("Content-Type", "application/xml")], body)

    def _control(self) -> None:
        plan = self.server.plan
        query = parse_qs(urlparse(self.path).query)
        if "enabled" in query:
            plan.enabled = query["enabled"][0] == "1"
        doc = {"enabled": plan.enabled, "counts": plan.snapshot(), "usage": plan.usage_snapshot()}
        body = json.dumps(doc).encode()
        self._reply(200, "OK", [("Content-Type", "application/json")], body)

    def _handle(self) -> None:
        body = self._body()  # always read all of it: the connection stays usable
        if self.path.startswith(CONTROL_PATH):
            self._control()
            return
        kind = self.server.plan.decide()
        if kind.startswith("error_"):
            status, code, message = _ERRORS[kind == "error_503"]
            self._error(status, code, message)
        elif kind == "stall":
            time.sleep(self.server.stall_s)
            self.close_connection = True  # no answer at all
        else:
            self._pass_on(body, lost=kind == "lost_response")

    def _pass_on(self, body: bytes, lost: bool) -> None:
        """Forward the request; answer with upstream's answer, or a 500 if it is `lost`."""
        try:
            status, reason, headers, data = _forward(
                self.server.upstream, self.command, self.path, list(self.headers.items()), body
            )
        except OSError as exc:  # upstream down: what an S3 client sees as a 502
            self._error(502, "BadGateway", f"upstream: {exc}")
            return
        self.server.plan.metered(self.command, self.path, len(body), len(data))
        if lost:
            self._error(500, "InternalError", "We encountered an internal error.")
            return
        self._reply(status, reason, headers, data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

    def log_message(self, format: str, *args: object) -> None:
        pass


def make_server(upstream: str, plan: FaultPlan, stall_s: float) -> ThreadingHTTPServer:
    """The proxy's server on 127.0.0.1 (a free port); serve_forever() runs it."""
    return _Server(upstream, plan, stall_s)


class FaultyS3Proxy:
    """Runs the proxy in a child process; `endpoint` is where S3 clients should go."""

    def __init__(
        self,
        upstream: str,
        *,
        error_rate: float = 0.1,
        stall_rate: float = 0.0,
        stall_s: float = 3.0,
        lost_rate: float = 0.0,
        seed: int = 0,
    ) -> None:
        FaultPlan(error_rate, stall_rate, lost_rate, seed)  # validates the rates here
        self.argv = [
            sys.executable,
            __file__,
            "--upstream",
            upstream,
            f"--error-rate={error_rate}",
            f"--stall-rate={stall_rate}",
            f"--stall-s={stall_s}",
            f"--lost-rate={lost_rate}",
            f"--seed={seed}",
        ]
        self.proc: subprocess.Popen[str] | None = None
        self.endpoint = ""

    def start(self) -> FaultyS3Proxy:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "listening on PORT" once it accepts
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"fault proxy did not start: {line!r}")
        self.endpoint = f"http://127.0.0.1:{int(line.split()[-1])}"
        return self

    def _control(self, query: str = "") -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.endpoint}{CONTROL_PATH}{query}", timeout=10) as r:
            return dict(json.load(r))

    def set_enabled(self, enabled: bool) -> None:
        self._control(f"?enabled={int(enabled)}")

    def counts(self) -> dict[str, int]:
        """Requests per outcome: forwarded, error_500, error_503, stall, lost_response."""
        return dict(self._control()["counts"])

    def usage(self) -> dict[str, int]:
        """What was forwarded: requests per price class ("put", "get", "delete") and bytes
        ("bytes_to_s3", "bytes_from_s3")."""
        return dict(self._control()["usage"])

    def injected(self) -> int:
        return sum(n for kind, n in self.counts().items() if kind != "forwarded")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def __enter__(self) -> FaultyS3Proxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="S3 fault-injecting proxy")
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--error-rate", type=float, default=0.1)
    parser.add_argument("--stall-rate", type=float, default=0.0)
    parser.add_argument("--stall-s", type=float, default=3.0)
    parser.add_argument("--lost-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    plan = FaultPlan(args.error_rate, args.stall_rate, args.lost_rate, args.seed)
    server = make_server(args.upstream, plan, args.stall_s)
    print(f"listening on {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
