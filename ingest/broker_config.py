"""A broker's settings: flags first, then TIERLOG_* environment variables, then defaults."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from cluster.authorizer import AuthSettings
from cluster.http.admission import ConcurrencyLimits
from cluster.http.guard import HttpLimits
from cluster.http.limits import DEFAULT_MAX_REQUEST_BYTES, LimitSettings
from ingest.data_limits import DataLimits


class KafkaConnSettings(NamedTuple):
    """The Kafka listener's connection limits before and around authentication
    (ingest/kafka/conn_gate.py, ingest/kafka/frames.py; docs/limits.md)."""

    preauth_max_frame_bytes: int = 512 * 1024  # Kafka's cap on a frame before SASL is done
    auth_timeout_ms: int = 10_000  # Java clients give up connection setup after 10 s
    max_preauth_connections: int = 1024  # not yet authenticated, broker-wide
    preauth_inflight_bytes: int = 16 * 1024 * 1024  # their own budget, apart from the main one


class BrokerConfig(NamedTuple):
    broker_id: int
    host: str
    port: int
    advertised_url: str
    data_dir: Path
    database_url: str
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    lease_ms: int = 3000  # a broker whose lease lapses is dead to the cluster
    heartbeat_ms: int = 500
    metadata_refresh_ms: int = 1000  # a fallback: NOTIFY normally wakes refreshes at once
    controller_tick_ms: int = 200
    replica_lag_ms: int = 10_000  # Kafka's replica.lag.time.max.ms (30 s there)
    request_timeout_ms: int = 30_000  # how long acks=all waits for the ISR
    default_partitions: int = 1
    default_replication_factor: int = 1
    # Configs a new topic gets unless its creator names them (`--topic-default NAME=VALUE`;
    # `tierlog dev` sets small segments): stored as the topic's own at creation.
    topic_defaults: tuple[tuple[str, str], ...] = ()
    tiering_duty_ms: int = 1000  # segment registration and local retention run this often
    # Backpressure from tiering (ingest/tiered/untiered_bound.py): sealed bytes not yet in the
    # cold tier above which client produce gets 503 + Retry-After; 0 turns it off.
    max_untiered_bytes: int = 8 * 1024**3
    # The log cleaner's pass interval (hot key compaction); TIERLOG_CLEANER_INTERVAL_MS too.
    cleaner_interval_ms: int = int(os.environ.get("TIERLOG_CLEANER_INTERVAL_MS", "15000"))
    auth: AuthSettings = AuthSettings()  # API keys + ACLs unless explicitly turned off
    tls_cert: str | None = None  # PEM files: the listener speaks HTTPS when both are set
    tls_key: str | None = None
    # Overload protection (cluster/http/limits.py): Kafka's queued.max.request.bytes, a cap on
    # waiting fetches, and how long a request body may take to arrive (slowloris).
    max_inflight_bytes: int = 256 * 1024 * 1024
    max_long_polls: int = 1024
    request_body_timeout_ms: int = 30_000
    # Expansion limits on produce (logformat/expansion.py): what a body may decode to.
    max_request_records: int = 1_000_000
    max_request_decoded_bytes: int = 128 * 1024 * 1024
    max_compression_ratio: float = 100.0
    # Headers, fetch size, entries per request: both protocols (ingest/service/limits.py).
    data_limits: DataLimits = DataLimits()
    http_limits: HttpLimits = HttpLimits()  # header size/count/deadline, connection caps
    concurrency: ConcurrencyLimits = ConcurrencyLimits()  # searches, admin requests at once
    # The Kafka wire-protocol listener (ingest/kafka/): off unless given. `kafka_advertised`
    # is the address Metadata names for this broker (default: the listen address, with the
    # advertised URL's host when listening on all interfaces).
    kafka_listen: tuple[str, int] | None = None
    kafka_advertised: tuple[str, int] | None = None
    # TLS listeners (SASL_SSL: SASL over TLS; SSL: TLS only, the client User:ANONYMOUS) with
    # the HTTP listener's --tls-cert/--tls-key; Metadata on them names their own ports.
    kafka_sasl_ssl_listen: tuple[str, int] | None = None
    kafka_ssl_listen: tuple[str, int] | None = None
    kafka_conn: KafkaConnSettings = KafkaConnSettings()


def env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"TIERLOG_{name}", default)


def kafka_advertised(config: BrokerConfig) -> tuple[str, int] | None:
    """Where Kafka clients reach this broker's listener (None: no listener): the
    --kafka-advertised address, else the listen address, with the advertised URL's host
    when it listens on every interface."""
    if config.kafka_listen is None:
        return None
    if config.kafka_advertised is not None:
        return config.kafka_advertised
    host, port = config.kafka_listen
    if host in ("0.0.0.0", "::", ""):
        host = urlsplit(config.advertised_url).hostname or "127.0.0.1"
    return host, port


def broker_limits(config: BrokerConfig) -> LimitSettings:
    """The HTTP layer's limits (cluster/http/limits.py) from a broker's settings."""
    return LimitSettings(
        max_request_bytes=config.max_request_bytes,
        max_inflight_bytes=config.max_inflight_bytes,
        max_long_polls=config.max_long_polls,
        body_timeout_s=config.request_body_timeout_ms / 1000,
    )
