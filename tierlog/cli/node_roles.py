"""`tierlog broker` and `tierlog fetch`: their flags come from the roles' settings tables
(ingest/settings.py, fetch/settings.py); here the resolved settings become the typed configs
the servers take."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cluster import node_settings as node
from cluster.settings_table import Settings
from fetch import settings as fetch
from fetch.settings import FETCH
from ingest import settings as broker
from ingest.settings import BROKER
from logformat.errors import TierlogError
from tierlog.cli.extensions import (
    groups_on_broker,
    groups_on_fetch_node,
    lake_on_node,
    registry_on_broker,
)
from tierlog.cli.role_settings import (
    cold_tier,
    concurrency_limits,
    http_limits,
    object_store,
    resolved,
    start_process,
)
from tierlog.cli.security_opts import auth_settings, scheme
from tierlog.cli.topic_defaults import parse_topic_defaults

if TYPE_CHECKING:
    from cluster.authorizer import AuthSettings
    from ingest.broker_config import BrokerConfig


def add_broker(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("broker", help="run one broker (HTTP produce/fetch, hot log)")
    BROKER.add_flags(p)
    p.add_argument(
        "--topic-default",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="a config new topics get unless their creator sets it (Kafka's broker-level "
        "log.segment.bytes, log.roll.ms, ...); repeatable; TIERLOG_TOPIC_DEFAULTS takes "
        "NAME=VALUE,NAME=VALUE",
    )
    p.set_defaults(func=run_broker)


def add_fetch(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "fetch", help="run a fetch node (consumer reads: cold from S3, hot via replicas)"
    )
    FETCH.add_flags(p)
    p.set_defaults(func=run_fetch)


def _node_setup(s: Settings, node_name: str) -> tuple[AuthSettings, str, int] | None:
    """A node role's auth settings and listen address, with the process set up; None, after
    saying why, when its settings do not allow it to start."""
    auth = auth_settings(s)  # first: a refusal should not wait for imports
    if auth is None or not start_process(s, node_name):
        return None
    from cluster.http.server import parse_listen

    if not s[node.DATABASE_URL]:
        print(
            f"tierlog {s.role}: --database-url or TIERLOG_DATABASE_URL is required",
            file=sys.stderr,
        )
        return None
    host, port = parse_listen(s[broker.LISTEN] if s.role == "broker" else s[fetch.LISTEN])
    return auth, host, port


def broker_config(
    s: Settings,
    listen: tuple[str, int],
    auth: AuthSettings,
    topic_defaults: tuple[tuple[str, str], ...],
) -> BrokerConfig:
    """The broker's typed config from its resolved settings."""
    from cluster.http.server import parse_listen
    from ingest.broker_config import BrokerConfig, KafkaConnSettings
    from ingest.data_limits import DataLimits

    def address(raw: str | None) -> tuple[str, int] | None:
        return parse_listen(raw) if raw else None

    host, port = listen
    return BrokerConfig(
        broker_id=s[broker.BROKER_ID],
        host=host,
        port=port,
        advertised_url=s[broker.ADVERTISED_URL] or f"{scheme(s)}://{host}:{port}",
        data_dir=Path(s[broker.DATA_DIR]).resolve(),
        database_url=s[node.DATABASE_URL] or "",
        topic_defaults=topic_defaults,
        auth=auth,
        tls_cert=s[node.TLS_CERT],
        tls_key=s[node.TLS_KEY],
        http_limits=http_limits(s),
        concurrency=concurrency_limits(s),
        data_limits=DataLimits(**s.fields(*broker.DATA_LIMITS)),
        kafka_listen=address(s[broker.KAFKA_LISTEN]),
        kafka_advertised=address(s[broker.KAFKA_ADVERTISED]),
        kafka_sasl_ssl_listen=address(s[broker.KAFKA_SASL_SSL_LISTEN]),
        kafka_ssl_listen=address(s[broker.KAFKA_SSL_LISTEN]),
        kafka_conn=KafkaConnSettings(
            preauth_max_frame_bytes=s[broker.KAFKA_PREAUTH_MAX_FRAME_BYTES],
            auth_timeout_ms=s[broker.KAFKA_AUTH_TIMEOUT_MS],
            max_preauth_connections=s[broker.KAFKA_MAX_PREAUTH_CONNECTIONS],
            preauth_inflight_bytes=s[broker.KAFKA_PREAUTH_INFLIGHT_BYTES],
        ),
        **s.fields(
            broker.MAX_REQUEST_BYTES,
            broker.LEASE_MS,
            broker.HEARTBEAT_MS,
            broker.METADATA_REFRESH_MS,
            broker.CONTROLLER_TICK_MS,
            broker.REPLICA_LAG_MS,
            broker.REQUEST_TIMEOUT_MS,
            broker.DEFAULT_PARTITIONS,
            broker.DEFAULT_REPLICATION_FACTOR,
            broker.TIERING_DUTY_MS,
            broker.MAX_UNTIERED_BYTES,
            broker.CLEANER_INTERVAL_MS,
            broker.MAX_INFLIGHT_BYTES,
            broker.MAX_LONG_POLLS,
            broker.REQUEST_BODY_TIMEOUT_MS,
            broker.MAX_REQUEST_RECORDS,
            broker.MAX_REQUEST_DECODED_BYTES,
            broker.MAX_COMPRESSION_RATIO,
        ),
    )


def run_broker(args: argparse.Namespace) -> int:
    s = resolved(BROKER, args)
    if s is None:
        return 2
    setup = _node_setup(s, str(s[broker.BROKER_ID]))
    if setup is None:
        return 2
    from ingest.broker_deps import broker_notices
    from ingest.server import serve

    auth, host, port = setup
    try:
        topic_defaults = parse_topic_defaults(args.topic_default, s[broker.TOPIC_DEFAULTS])
    except TierlogError as exc:
        print(f"tierlog broker: --topic-default: {exc.message}", file=sys.stderr)
        return 2
    config = broker_config(s, (host, port), auth, topic_defaults)
    store = object_store(s)
    # One LISTEN connection for the broker and its cold reader: the broker's named session.
    notices = broker_notices(config)
    serve(
        config,
        cold_reader=cold_tier(s, config.database_url, store, notices),
        extensions=[groups_on_broker, lake_on_node(store), registry_on_broker],
        notices=notices,
    )
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    s = resolved(FETCH, args)
    if s is None:
        return 2
    setup = _node_setup(s, s[fetch.LISTEN])
    if setup is None:
        return 2
    from cluster.notify_hub import NotifyHub
    from fetch.node import FetchNodeConfig
    from fetch.server import serve

    auth, host, port = setup
    store = object_store(s)
    if store is None:
        print(
            "tierlog fetch: no TIERLOG_S3_ENDPOINT / TIERLOG_S3_BUCKET: every read goes to a "
            "replica",
            file=sys.stderr,
        )
    database_url = s[node.DATABASE_URL] or ""
    config = FetchNodeConfig(
        host,
        port,
        database_url,
        s[fetch.REQUEST_TIMEOUT_MS],
        s[fetch.METADATA_REFRESH_MS],
        auth=auth,
        tls_cert=s[node.TLS_CERT],
        tls_key=s[node.TLS_KEY],
        http_limits=http_limits(s),
        concurrency=concurrency_limits(s),
    )
    notices = NotifyHub(database_url)  # the node's one LISTEN connection, its cold reader's too
    cold = cold_tier(s, database_url, store, notices)
    serve(config, cold, [groups_on_fetch_node, lake_on_node(store)], notices)
    return 0
