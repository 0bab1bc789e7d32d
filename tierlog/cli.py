"""The `tierlog` command: server roles (imported lazily) and client commands."""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from logformat.errors import TierlogError

DEFAULT_URL = "http://127.0.0.1:8080"


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"TIERLOG_{name}", default)


def _add_broker(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("broker", help="run one broker (HTTP produce/fetch, hot log)")
    p.add_argument("--broker-id", type=int, default=int(_env("BROKER_ID", "1") or 1))
    p.add_argument("--listen", default=_env("LISTEN", "127.0.0.1:8080"), help="HOST:PORT")
    p.add_argument(
        "--advertised-url",
        default=_env("ADVERTISED_URL"),
        help="URL other nodes and clients use (default: http://LISTEN)",
    )
    p.add_argument("--data-dir", default=_env("DATA_DIR", ".tierlog/broker-1"))
    p.add_argument("--database-url", default=_env("DATABASE_URL"))
    p.add_argument(
        "--max-request-bytes",
        type=int,
        default=int(_env("MAX_REQUEST_BYTES", str(64 * 1024 * 1024)) or 0),
    )
    p.add_argument(
        "--lease-ms",
        type=int,
        default=int(_env("LEASE_MS", "3000") or 3000),
        help="broker lease: a broker silent this long is dead to the cluster",
    )
    p.add_argument("--heartbeat-ms", type=int, default=int(_env("HEARTBEAT_MS", "500") or 500))
    p.add_argument(
        "--replica-lag-ms",
        type=int,
        default=int(_env("REPLICA_LAG_MS", "10000") or 10000),
        help="replica.lag.time.max.ms: a follower this far behind leaves the ISR",
    )
    p.add_argument(
        "--request-timeout-ms", type=int, default=int(_env("REQUEST_TIMEOUT_MS", "30000") or 30000)
    )
    p.add_argument(
        "--default-replication-factor",
        type=int,
        default=int(_env("DEFAULT_REPLICATION_FACTOR", "1") or 1),
    )
    p.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"))
    p.set_defaults(func=_run_broker)


def _run_broker(args: argparse.Namespace) -> int:
    from ingest.broker import serve
    from ingest.broker_config import BrokerConfig, parse_listen
    from tierlog import logs

    logs.setup("broker", args.log_level)
    if not args.database_url:
        print("tierlog broker: --database-url or TIERLOG_DATABASE_URL is required", file=sys.stderr)
        return 2
    host, port = parse_listen(args.listen)
    advertised = args.advertised_url or f"http://{host}:{port}"
    serve(
        BrokerConfig(
            broker_id=args.broker_id,
            host=host,
            port=port,
            advertised_url=advertised,
            data_dir=Path(args.data_dir).resolve(),
            database_url=args.database_url,
            max_request_bytes=args.max_request_bytes,
            lease_ms=args.lease_ms,
            heartbeat_ms=args.heartbeat_ms,
            replica_lag_ms=args.replica_lag_ms,
            request_timeout_ms=args.request_timeout_ms,
            default_replication_factor=args.default_replication_factor,
        )
    )
    return 0


def _add_tiering(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tiering", help="run a tiering worker (sealed segments -> Delta in S3)")
    p.add_argument("--worker-id", default=_env("WORKER_ID"), help="default: tiering-HOST-PID")
    p.add_argument("--database-url", default=_env("DATABASE_URL"))
    p.add_argument("--poll-ms", type=int, default=int(_env("POLL_MS", "1000") or 1000))
    p.add_argument(
        "--lease-ms",
        type=int,
        default=int(_env("TIERING_LEASE_MS", "120000") or 120000),
        help="claim lease: a segment whose worker is silent this long is taken over",
    )
    p.add_argument(
        "--listen",
        default=_env("TIERING_LISTEN"),
        help="HOST:PORT serving /metrics and /healthz (default: none)",
    )
    p.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"))
    p.set_defaults(func=_run_tiering)


def _run_tiering(args: argparse.Namespace) -> int:
    import signal
    import socket
    import threading

    from ingest.broker_config import parse_listen
    from metadata.db import make_engine, migrate
    from tiering import metrics
    from tiering.object_store import ObjectStore, ObjectStoreConfig
    from tiering.worker import TieringWorker
    from tierlog import logs

    logs.setup("tiering", args.log_level)
    if not args.database_url:
        print(
            "tierlog tiering: --database-url or TIERLOG_DATABASE_URL is required", file=sys.stderr
        )
        return 2
    worker_id = args.worker_id or f"tiering-{socket.gethostname()}-{os.getpid()}"
    engine = make_engine(args.database_url)
    migrate(engine)
    config = ObjectStoreConfig.from_env()
    ObjectStore(config).ensure_bucket()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    # Unhealthy when the loop has not come round for a few leases (stuck on a dead peer).
    health = metrics.Health(stale_s=max(60.0, 3 * args.lease_ms / 1000))
    server = None
    if args.listen:
        host, port = parse_listen(args.listen)
        server = metrics.serve_metrics(host, port, health)
        print(f"tiering metrics on http://{host}:{server.server_port}/metrics", file=sys.stderr)
    worker = TieringWorker(engine, config, worker_id, lease_ms=args.lease_ms)
    try:
        worker.run_forever(args.poll_ms, stop, health)
    finally:
        worker.close()
        if server is not None:
            server.shutdown()
        engine.dispose()
    return 0


def _add_dev(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dev", help="run the whole system locally on embedded defaults")
    p.add_argument("--brokers", type=int, default=1)
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--data-dir", default=".tierlog")
    p.add_argument("--log-level", default="INFO")
    p.set_defaults(func=_run_dev)


def _run_dev(args: argparse.Namespace) -> int:
    from tierlog.dev import run_dev

    return run_dev(Path(args.data_dir).resolve(), args.brokers, args.port, args.log_level)


def main(argv: Sequence[str] | None = None) -> int:
    from tierlog import commands

    parser = argparse.ArgumentParser(prog="tierlog", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_dev(sub)
    _add_broker(sub)
    _add_tiering(sub)
    commands.add_client_commands(sub, _env("URL", DEFAULT_URL) or DEFAULT_URL)
    args = parser.parse_args(argv)
    # `kill -USR1 <pid>` prints every thread's stack to stderr: how to see where a hang is.
    faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
    try:
        return int(args.func(args) or 0)
    except TierlogError as exc:
        print(f"tierlog: {exc.code.value}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
