"""`tierlog tiering` and `tierlog compaction`: the stateless worker roles.

Both share one shape — a Postgres URL, a worker id, the bucket, a loop until SIGINT/SIGTERM,
and optionally a /metrics + /healthz listener — so they share the code that runs it.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from cluster import node_settings as node
from cluster.settings_table import Settings
from compaction.settings import COMPACTION
from tiering.settings import TIERING
from tierlog.cli.role_settings import resolved, s3_config, start_process

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from cluster.worker_health import Health
    from coldstore.object_store import ObjectStoreConfig


class Worker(Protocol):
    def run_forever(self, poll_ms: int, stop: threading.Event, health: Health) -> None: ...

    def close(self) -> None: ...


def add_worker_roles(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tiering", help="run a tiering worker (sealed segments -> Delta in S3)")
    TIERING.add_flags(p)
    p.set_defaults(func=_run_tiering)
    p = sub.add_parser(
        "compaction", help="run a compaction worker (cold retention, file merge, key compaction)"
    )
    COMPACTION.add_flags(p)
    p.set_defaults(func=_run_compaction)


def _run_tiering(args: argparse.Namespace) -> int:
    from tiering import settings as tiering
    from tiering.batch import BatchSettings
    from tiering.worker import TieringWorker

    s = resolved(TIERING, args)
    if s is None:
        return 2
    batch = BatchSettings(
        max_segments=s[tiering.BATCH_SEGMENTS],
        max_bytes=s[tiering.BATCH_MB] << 20,
        upload_threads=s[tiering.UPLOAD_THREADS],
        encode_threads=s[tiering.ENCODE_THREADS],
    )
    lease_ms = s[tiering.LEASE_MS]

    def make(engine: Engine, config: ObjectStoreConfig, worker_id: str) -> Worker:
        return TieringWorker(engine, config, worker_id, lease_ms=lease_ms, batch=batch)

    # Unhealthy when the loop has not come round for a few leases (stuck on a dead peer).
    return _run_worker(s, make, stale_s=max(60.0, 3 * lease_ms / 1000))


def _run_compaction(args: argparse.Namespace) -> int:
    from compaction import settings as compaction
    from compaction.jobs import Settings as JobSettings
    from compaction.worker import CompactionWorker

    s = resolved(COMPACTION, args)
    if s is None:
        return 2
    settings = JobSettings(
        target_file_bytes=s[compaction.TARGET_FILE_BYTES],
        min_grace_ms=s[compaction.MIN_GRACE_MS],
        stale_upload_ms=s[compaction.STALE_UPLOAD_MS],
        erasure_commit_pause_ms=s[compaction.ERASURE_COMMIT_PAUSE_MS],
    )

    def make(engine: Engine, config: ObjectStoreConfig, worker_id: str) -> Worker:
        return CompactionWorker(engine, config, worker_id, settings)

    poll_ms = s.values[node.POLL_MS]
    return _run_worker(s, make, stale_s=max(300.0, 10 * poll_ms / 1000))


def _run_worker(
    s: Settings,
    make: Callable[[Engine, ObjectStoreConfig, str], Worker],
    stale_s: float,
) -> int:
    from cluster.dependency_wait import DependencyUnavailableError, wait_for
    from cluster.http.server import parse_listen
    from cluster.worker_health import Health, serve_metrics
    from coldstore.object_store import S3_TRANSIENT_ERRORS, ObjectStore
    from metadata.db import make_engine, migrate
    from metadata.db_errors import POSTGRES_DOWN
    from tierlog import logs

    role = s.role
    if not start_process(s):
        return 2
    database_url = s[node.DATABASE_URL]
    if not database_url:
        print(
            f"tierlog {role}: --database-url or TIERLOG_DATABASE_URL is required", file=sys.stderr
        )
        return 2
    worker_id = s[node.WORKER_ID] or f"{role}-{socket.gethostname()}-{os.getpid()}"
    logs.name_node(worker_id)
    engine = make_engine(database_url)
    config = s3_config(s)
    try:  # Postgres or S3 briefly away at start-up: wait for them, bounded
        wait_for("Postgres", lambda: migrate(engine), retry_on=POSTGRES_DOWN)
        wait_for("S3", ObjectStore(config).ensure_bucket, retry_on=S3_TRANSIENT_ERRORS)
    except DependencyUnavailableError as exc:
        print(f"tierlog {role}: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    health = Health(stale_s=stale_s)
    server = None
    listen = s.values[node.WORKER_LISTEN]
    if listen:
        host, port = parse_listen(listen)
        server = serve_metrics(host, port, health)
        print(f"{role} metrics on http://{host}:{server.server_port}/metrics", file=sys.stderr)
    worker = make(engine, config, worker_id)
    try:
        worker.run_forever(s.values[node.POLL_MS], stop, health)
    finally:
        worker.close()
        if server is not None:
            server.shutdown()
            server.server_close()
        engine.dispose()
    return 0
