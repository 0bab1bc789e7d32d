"""The pre-imported parent of the suite's tierlog server processes (tests/integration/zygote.py).

A broker's start-up is mostly imports (pyarrow, SQLAlchemy, starlette, kio: ~0.8 CPU-s on a
quiet machine, more under load), paid again by each of the ~250 brokers and fetch nodes the
suite starts. This process imports them once and forks a child per server; the child then runs
`tierlog`'s own `main(argv)` exactly as `python -m tierlog` would, in a process of its own (its
pid, ports, signals, kill -9 and exit status are a real process's).

It forks only while it is its own only thread, and checks that before each fork: a child
forked from a threaded process inherits the locks the other threads held, held for good (POSIX
allows such a child only async-signal-safe calls until it execs). So imports that would start a
thread are kept from it: numpy's OpenBLAS threads (OPENBLAS_NUM_THREADS=1, as tierlog/startup.py
sets for every tierlog process) and the purging thread of the jemalloc inside pyarrow (its
background_thread option; pyarrow's default pool here is mimalloc, so that jemalloc serves no
allocation either way); deltalake's runtime makes threads at import, so the tiering and
compaction workers, which use it, import it themselves after the fork.

Protocol (one JSON object per line on fd `argv[1]`, a socket): `{"op": "spawn", "argv": [...],
"env": {...}, "cwd": "...", "log": "path"}` -> `{"pid": n, "spawn": k}`; `{"op": "poll", "spawn":
k}` -> `{"returncode": n | null}` (Popen's: -signal if killed). Children are reaped on each
request; a spawn is polled by its number, not its pid (pids are reused).
"""

from __future__ import annotations

import gc
import json
import os
import socket
import sys
import threading
from typing import Any

from http_transport.trust import default_trust
from tierlog.startup import prepare

PRELOAD = (
    "tierlog.cli.main",
    "tierlog.cli.commands",  # main() imports the client commands' parsers when it runs
    "ingest.server",
    "ingest.broker_config",
    "ingest.data_limits",
    "cluster.http.server",
    "fetch.server",
    "fetch.node",
    "console.app",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.websockets.auto",
    "uvicorn.lifespan.on",
    "uvicorn.loops.auto",
    "aiobotocore.session",  # a node's cold reader (coldstore.object_store.AsyncObjectStore)
    "aiobotocore.config",
    # What a broker imports as it starts (ingest/server.py's extensions, uvicorn's loop), in
    # each child otherwise: a forked broker's CPU to readiness 0.21 -> 0.12 s (9 starts each).
    "groups.mount",
    "registry.mount",
    "fetch.lake",
    "uvicorn.loops.uvloop",
    # The Kafka listener, which a broker imports only when it has one (kio's message
    # classes are most of that import): a Kafka-listening forked broker's CPU to readiness
    # 0.32-0.45 -> 0.10-0.16 s (a 3-broker Cluster(kafka=True), three starts each way).
    "ingest.kafka.listener",
    "ingest.kafka.tls_listeners",
)
NOT_FORK_SAFE = ("deltalake",)  # a runtime with threads, made at import
_TRUST_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR")  # what the preloaded default TLS context read


class _Child(Exception):
    """Raised in a forked child to unwind the server's frames before it runs `tierlog`."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request


# The jemalloc pyarrow ships reads this at pyarrow's import (a prefixed MALLOC_CONF).
JEMALLOC_CONF = ("JE_ARROW_MALLOC_CONF", "background_thread:false")


def other_threads() -> list[str]:
    """The names of this process's threads other than the calling one (native ones too)."""
    me = str(threading.get_native_id())
    tasks = [t for t in os.listdir("/proc/self/task") if t != me]
    names = []
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f"{f.read().strip()} ({tid})")
        except FileNotFoundError:  # it ended meanwhile
            continue
    return names


def _warm_s3_session() -> None:
    """The process's boto3 session with botocore's S3 model loaded (coldstore.s3_sessions:
    ~0.1 CPU-s per server otherwise; the cold reader's aiobotocore session shares its loader).
    Making a client opens no connection and starts no thread: safe across fork."""
    from coldstore.object_store import ObjectStoreConfig
    from coldstore.s3_sessions import s3_client

    unused = "http://127.0.0.1:9"  # never contacted
    keys = {"access_key_id": "-", "secret_access_key": "-"}
    s3_client(ObjectStoreConfig("warm", endpoint_url=unused, **keys))


def _preload() -> None:
    prepare()
    os.environ.setdefault(*JEMALLOC_CONF)
    gc.disable()  # as tierlog/__main__.py: long-lived module objects only
    for name in PRELOAD:
        __import__(name)
    _warm_s3_session()
    default_trust()  # every child's HTTP clients share it (http_transport/trust.py)
    bad = [m for m in NOT_FORK_SAFE if m in sys.modules]
    assert not bad, f"preloading imported {bad}, which is not safe across fork"
    gc.freeze()
    gc.enable()


class ExitCodes:
    """The exit codes of the children reaped so far, by spawn number (the zygote numbers its
    spawns). Not by pid: the kernel reuses pids (32768 of them here, and a suite run starts
    thousands of processes), so a new child may have the pid of one reaped before, whose
    code must be neither the new child's nor lost to the old one's owner."""

    def __init__(self) -> None:
        self._spawns = 0
        self._live: dict[int, int] = {}  # pid -> spawn number, until reaped
        self._codes: dict[int, int] = {}  # spawn number -> exit code

    def forked(self, pid: int) -> int:
        """Number a new child; its number answers polls."""
        self._spawns += 1
        self._live[pid] = self._spawns
        return self._spawns

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            spawn = self._live.pop(pid, None)
            if spawn is not None:
                self._codes[spawn] = os.waitstatus_to_exitcode(status)

    def of(self, spawn: int) -> int | None:
        return self._codes.get(spawn)


def serve(sock: socket.socket) -> None:
    exits = ExitCodes()
    lines = sock.makefile("rb")
    for line in lines:
        request = json.loads(line)
        exits.reap()
        if request["op"] == "spawn":
            if threads := other_threads():
                sys.exit(f"not forking: this process has other threads: {threads}")
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                lines.close()
                sock.close()
                raise _Child(request)
            reply: dict[str, Any] = {"pid": pid, "spawn": exits.forked(pid)}
        else:
            reply = {"returncode": exits.of(request["spawn"])}
        sock.sendall(json.dumps(reply).encode() + b"\n")


def _redirect(log: str) -> None:
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def run_child(request: dict[str, Any]) -> int:
    """What `python -m tierlog <args>` runs, in the forked child."""
    from tierlog.cli.main import main
    from tierlog.devstack import parent_watch

    _redirect(request["log"])
    os.chdir(request["cwd"])
    trusted = [os.environ.get(k) for k in _TRUST_ENV]
    os.environ.clear()
    os.environ.update(request["env"])
    if [os.environ.get(k) for k in _TRUST_ENV] != trusted:
        default_trust.cache_clear()  # this child trusts other CAs than the preloaded context
    # The child's parent is this server, which goes when the test process goes.
    if parent_watch.ENV in os.environ:
        os.environ[parent_watch.ENV] = str(os.getppid())
    argv: list[str] = request["argv"]
    sys.argv = ["tierlog", *argv]
    return main(argv)


def _main() -> int:
    from tierlog.devstack.parent_watch import die_with_parent

    die_with_parent()  # the test process's end ends this server, then (PDEATHSIG) its children
    _preload()
    sock = socket.socket(fileno=int(sys.argv[1]))
    try:
        serve(sock)
    except _Child as child:
        request = child.request
    else:
        return 0
    # Here the server's frames are gone: the child runs as a fresh `python -m tierlog`.
    return run_child(request)


if __name__ == "__main__":
    raise SystemExit(_main())
