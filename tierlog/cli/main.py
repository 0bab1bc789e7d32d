"""The `tierlog` command: server roles (imported lazily) and client commands."""

from __future__ import annotations

import argparse
import faulthandler
import importlib.metadata
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from logformat.errors import TierlogError
from tierlog.cli.concurrency_opts import add_concurrency_flags, concurrency_limits
from tierlog.cli.console_cmd import add_console
from tierlog.cli.extensions import (
    cold_tier,
    groups_on_broker,
    groups_on_fetch_node,
    lake_on_broker,
    lake_on_fetch_node,
    registry_on_broker,
    s3_configured,
)
from tierlog.cli.kafka_opts import add_kafka_listener_flags, kafka_conn_config
from tierlog.cli.limits_opts import add_http_flags, add_limit_flags, http_limits, limit_config
from tierlog.cli.quotas_cmd import add_quotas
from tierlog.cli.security_cmd import add_security_commands
from tierlog.cli.security_opts import add_server_security, auth_settings, scheme
from tierlog.cli.topic_defaults import parse_topic_defaults
from tierlog.cli.unreachable import refused, refused_message
from tierlog.cli.worker_roles import add_worker_roles
from tierlog.devstack.parent_watch import die_with_parent

if TYPE_CHECKING:
    from cluster.authorizer import AuthSettings

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
    p.add_argument(
        "--topic-default",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="a config new topics get unless their creator sets it (Kafka's broker-level "
        "log.segment.bytes, log.roll.ms, ...); repeatable; TIERLOG_TOPIC_DEFAULTS takes "
        "NAME=VALUE,NAME=VALUE",
    )
    p.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"))
    p.add_argument(
        "--kafka-listen",
        default=_env("KAFKA_LISTEN"),
        help="HOST:PORT of the Kafka wire-protocol listener (off unless given)",
    )
    p.add_argument(
        "--kafka-advertised",
        default=_env("KAFKA_ADVERTISED"),
        help="HOST:PORT Kafka clients are told to use for this broker (default: the listen "
        "address); registered, so every broker's Metadata names it",
    )
    add_kafka_listener_flags(p)
    add_server_security(p)
    add_limit_flags(p)
    add_http_flags(p)
    add_concurrency_flags(p)
    p.set_defaults(func=_run_broker)


def _node_setup(args: argparse.Namespace, role: str) -> tuple[AuthSettings, str, int] | None:
    """A node role's auth settings and listen address, with logging set up; None, after
    saying why, when its flags do not allow it to start."""
    auth = auth_settings(args, role)  # first: a refusal should not wait for imports
    if auth is None:
        return None
    from cluster.http.server import parse_listen
    from tierlog import logs

    logs.setup(role, args.log_level, str(args.broker_id) if role == "broker" else args.listen)
    if not args.database_url:
        print(
            f"tierlog {role}: --database-url or TIERLOG_DATABASE_URL is required", file=sys.stderr
        )
        return None
    host, port = parse_listen(args.listen)
    return auth, host, port


def _run_broker(args: argparse.Namespace) -> int:
    setup = _node_setup(args, "broker")
    if setup is None:
        return 2
    from cluster.http.server import parse_listen
    from ingest.broker_config import BrokerConfig
    from ingest.server import serve

    auth, host, port = setup
    try:
        topic_defaults = parse_topic_defaults(args.topic_default, _env("TOPIC_DEFAULTS"))
    except TierlogError as exc:
        print(f"tierlog broker: --topic-default: {exc.message}", file=sys.stderr)
        return 2
    advertised = args.advertised_url or f"{scheme(args)}://{host}:{port}"
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
            topic_defaults=topic_defaults,
            auth=auth,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            http_limits=http_limits(args),
            concurrency=concurrency_limits(args),
            kafka_listen=parse_listen(args.kafka_listen) if args.kafka_listen else None,
            kafka_advertised=(
                parse_listen(args.kafka_advertised) if args.kafka_advertised else None
            ),
            **limit_config(args),
            **kafka_conn_config(args),
        ),
        cold_reader=cold_tier(args.database_url),
        extensions=[groups_on_broker, lake_on_broker, registry_on_broker],
    )
    return 0


def _add_fetch(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "fetch", help="run a fetch node (consumer reads: cold from S3, hot via replicas)"
    )
    p.add_argument("--listen", default=_env("FETCH_LISTEN", "127.0.0.1:8090"), help="HOST:PORT")
    p.add_argument("--database-url", default=_env("DATABASE_URL"))
    p.add_argument(
        "--request-timeout-ms", type=int, default=int(_env("REQUEST_TIMEOUT_MS", "30000") or 30000)
    )
    p.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"))
    add_server_security(p)
    add_http_flags(p)
    add_concurrency_flags(p)
    p.set_defaults(func=_run_fetch)


def _run_fetch(args: argparse.Namespace) -> int:
    setup = _node_setup(args, "fetch")
    if setup is None:
        return 2
    from fetch.node import FetchNodeConfig
    from fetch.server import serve

    auth, host, port = setup
    if not s3_configured():
        print(
            "tierlog fetch: no TIERLOG_S3_ENDPOINT / TIERLOG_S3_BUCKET: every read goes to a "
            "replica",
            file=sys.stderr,
        )
    config = FetchNodeConfig(
        host,
        port,
        args.database_url,
        args.request_timeout_ms,
        auth=auth,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        http_limits=http_limits(args),
        concurrency=concurrency_limits(args),
    )
    serve(config, cold_tier(args.database_url), [groups_on_fetch_node, lake_on_fetch_node])
    return 0


def _add_dev(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dev", help="run the whole system locally on embedded defaults")
    p.add_argument(
        "--brokers", type=int, default=1, help="brokers to run (new topics get RF min(3, N))"
    )
    p.add_argument(
        "--port",
        type=int,
        default=8080,
        help="first broker's port (the others follow; the fetch node is on PORT+10, the web "
        "console on PORT-10)",
    )
    p.add_argument(
        "--data-dir",
        default=".tierlog",
        help="where Postgres, S3, the brokers' logs and dev.env live (default .tierlog)",
    )
    p.add_argument(
        "--auth",
        action="store_true",
        help="require API keys and ACLs, as outside dev; prints an admin key (User:admin)",
    )
    p.add_argument(
        "--kafka-defaults",
        action="store_true",
        help="new topics get Kafka's segment defaults (segment.bytes 1 GiB, segment.ms 7 days) "
        "instead of dev's 1 MiB and 5 s, which send records to S3 within seconds",
    )
    p.add_argument(
        "--log-level",
        default=None,
        help="DEBUG, INFO, WARNING or ERROR (default: WARNING on a terminal, so the banner "
        "is not lost among start-up lines; INFO otherwise)",
    )
    p.set_defaults(func=_run_dev)


def _run_dev(args: argparse.Namespace) -> int:
    from tierlog.devstack.dev import run_dev

    log_level = args.log_level or ("WARNING" if sys.stderr.isatty() else "INFO")
    return run_dev(
        Path(args.data_dir).resolve(),
        args.brokers,
        args.port,
        log_level,
        auth=args.auth,
        kafka_defaults=args.kafka_defaults,
    )


def _version() -> str:
    try:
        return importlib.metadata.version("tierlog")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown"


class Terminated(KeyboardInterrupt):
    """SIGTERM (a timeout, systemd, docker stop): a client command stops as on Ctrl-C, so
    `finally` blocks run (a group consumer leaves its group, produce prints its summary).
    Server roles and `tierlog dev` handle SIGTERM their own way."""


_SERVERS = frozenset({"dev", "broker", "fetch", "tiering", "compaction", "console"})


def _url_source(argv: Sequence[str] | None) -> str:
    given = argv if argv is not None else sys.argv[1:]
    if any(a == "--url" or a.startswith("--url=") for a in given):
        return "--url's"
    return (
        "TIERLOG_URL's" if _env("URL") else f"the default, {DEFAULT_URL}, as TIERLOG_URL is unset"
    )


def _terminate(_signum: int, _frame: object) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    from tierlog.cli import commands

    parser = argparse.ArgumentParser(prog="tierlog", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tierlog {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_dev(sub)
    _add_broker(sub)
    add_worker_roles(sub)
    _add_fetch(sub)
    commands.add_client_commands(sub, _env("URL", DEFAULT_URL) or DEFAULT_URL)
    add_quotas(sub)
    add_security_commands(sub)
    add_console(sub, _env("URL", DEFAULT_URL) or DEFAULT_URL)
    args = parser.parse_args(argv)
    die_with_parent()  # started by `tierlog dev` or a test harness: go when it goes
    # `kill -USR1 <pid>` prints every thread's stack to stderr: how to see where a hang is.
    faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
    if args.command not in _SERVERS:  # servers stop on SIGTERM their own way (uvicorn's)
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.func(args) or 0)
    except TierlogError as exc:
        if refused(exc) and isinstance(getattr(args, "url", None), str):
            message = refused_message(exc, args.url, _url_source(argv))
            print(f"tierlog: NETWORK_EXCEPTION: {message}", file=sys.stderr)
            return 1
        print(f"tierlog: {exc.code.value}: {exc.message}", file=sys.stderr)
        return 1
    except Terminated:
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
