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

from tierlog.cli.security_opts import add_tls_ca, trust_tls_ca

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from cluster.worker_health import Health
    from coldstore.object_store import ObjectStoreConfig


class Worker(Protocol):
    def run_forever(self, poll_ms: int, stop: threading.Event, health: Health) -> None: ...

    def close(self) -> None: ...


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"TIERLOG_{name}", default)


def _int_env(name: str, default: int) -> int:
    return int(_env(name, str(default)) or default)


def _common(p: argparse.ArgumentParser, role: str, poll_env: str, poll_ms: int) -> None:
    p.add_argument("--worker-id", default=_env("WORKER_ID"), help=f"default: {role}-HOST-PID")
    p.add_argument("--database-url", default=_env("DATABASE_URL"))
    p.add_argument("--poll-ms", type=int, default=_int_env(poll_env, poll_ms))
    p.add_argument(
        "--listen",
        default=_env(f"{role.upper()}_LISTEN"),
        help="HOST:PORT serving /metrics and /healthz (default: none)",
    )
    p.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"))
    add_tls_ca(p)  # tiering downloads segments from brokers


def add_worker_roles(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tiering", help="run a tiering worker (sealed segments -> Delta in S3)")
    _common(p, "tiering", "POLL_MS", 1000)
    p.add_argument(
        "--lease-ms",
        type=int,
        default=_int_env("TIERING_LEASE_MS", 120000),
        help="claim lease: a segment whose worker is silent this long is taken over",
    )
    p.add_argument(
        "--batch-segments",
        type=int,
        default=_int_env("TIERING_BATCH_SEGMENTS", 16),
        help="sealed segments (of one topic) per Delta commit, at most",
    )
    p.add_argument(
        "--batch-mb",
        type=int,
        default=_int_env("TIERING_BATCH_MB", 1024),
        help="MiB of segments per Delta commit, at most (the temp disk a batch may use)",
    )
    p.add_argument(
        "--encode-threads",
        type=int,
        default=_int_env("TIERING_ENCODE_THREADS", 2),
        help="threads turning segments into Parquet",
    )
    p.add_argument(
        "--upload-threads",
        type=int,
        default=_int_env("TIERING_UPLOAD_THREADS", 2),
        help="threads uploading Parquet files to S3",
    )
    p.set_defaults(func=_run_tiering)

    p = sub.add_parser(
        "compaction", help="run a compaction worker (cold retention, file merge, key compaction)"
    )
    _common(p, "compaction", "COMPACTION_POLL_MS", 10000)
    p.add_argument(
        "--target-file-bytes",
        type=int,
        default=_int_env("COMPACTION_TARGET_FILE_BYTES", 64 << 20),
        help="merges and key compaction write cold files of about this size",
    )
    p.add_argument(
        "--min-grace-ms",
        type=int,
        default=_int_env("COMPACTION_MIN_GRACE_MS", 60000),
        help="removed files' objects stay at least this long (and file.delete.delay.ms)",
    )
    p.add_argument(
        "--stale-upload-ms",
        type=int,
        default=_int_env("COMPACTION_STALE_UPLOAD_MS", 24 * 3600 * 1000),
        help="abort multipart uploads left open this long (a writer killed mid-upload)",
    )
    p.set_defaults(func=_run_compaction)


def _run_tiering(args: argparse.Namespace) -> int:
    from tiering.batch import BatchSettings
    from tiering.worker import TieringWorker

    for flag in ("batch_segments", "batch_mb", "encode_threads", "upload_threads"):
        if getattr(args, flag) < 1:
            print(f"tierlog tiering: --{flag.replace('_', '-')} must be 1 or more", file=sys.stderr)
            return 2
    batch = BatchSettings(
        max_segments=args.batch_segments,
        max_bytes=args.batch_mb << 20,
        upload_threads=args.upload_threads,
        encode_threads=args.encode_threads,
    )

    def make(engine: Engine, config: ObjectStoreConfig, worker_id: str) -> Worker:
        return TieringWorker(engine, config, worker_id, lease_ms=args.lease_ms, batch=batch)

    # Unhealthy when the loop has not come round for a few leases (stuck on a dead peer).
    return _run_worker("tiering", args, make, stale_s=max(60.0, 3 * args.lease_ms / 1000))


def _run_compaction(args: argparse.Namespace) -> int:
    from compaction.jobs import Settings
    from compaction.worker import CompactionWorker

    settings = Settings(
        target_file_bytes=args.target_file_bytes,
        min_grace_ms=args.min_grace_ms,
        stale_upload_ms=args.stale_upload_ms,
    )

    def make(engine: Engine, config: ObjectStoreConfig, worker_id: str) -> Worker:
        return CompactionWorker(engine, config, worker_id, settings)

    return _run_worker("compaction", args, make, stale_s=max(300.0, 10 * args.poll_ms / 1000))


def _run_worker(
    role: str,
    args: argparse.Namespace,
    make: Callable[[Engine, ObjectStoreConfig, str], Worker],
    stale_s: float,
) -> int:
    from sqlalchemy.exc import OperationalError

    from cluster.dependency_wait import DependencyUnavailableError, wait_for
    from cluster.http.server import parse_listen
    from cluster.worker_health import Health, serve_metrics
    from coldstore.object_store import S3_TRANSIENT_ERRORS, ObjectStore, ObjectStoreConfig
    from metadata.db import make_engine, migrate
    from tierlog import logs

    logs.setup(role, args.log_level)
    if not args.database_url:
        print(
            f"tierlog {role}: --database-url or TIERLOG_DATABASE_URL is required", file=sys.stderr
        )
        return 2
    if not trust_tls_ca(args, role):
        return 2
    worker_id = args.worker_id or f"{role}-{socket.gethostname()}-{os.getpid()}"
    logs.name_node(worker_id)
    engine = make_engine(args.database_url)
    config = ObjectStoreConfig.from_env()
    try:  # Postgres or S3 briefly away at start-up: wait for them, bounded
        wait_for("Postgres", lambda: migrate(engine), retry_on=(OperationalError,))
        wait_for("S3", ObjectStore(config).ensure_bucket, retry_on=S3_TRANSIENT_ERRORS)
    except (DependencyUnavailableError, ValueError) as exc:  # ValueError: a bad wait setting
        print(f"tierlog {role}: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    health = Health(stale_s=stale_s)
    server = None
    if args.listen:
        host, port = parse_listen(args.listen)
        server = serve_metrics(host, port, health)
        print(f"{role} metrics on http://{host}:{server.server_port}/metrics", file=sys.stderr)
    worker = make(engine, config, worker_id)
    try:
        worker.run_forever(args.poll_ms, stop, health)
    finally:
        worker.close()
        if server is not None:
            server.shutdown()
            server.server_close()
        engine.dispose()
    return 0
