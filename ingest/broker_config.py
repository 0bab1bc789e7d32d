"""A broker's typed, frozen settings. The defaults are the settings table's
(ingest/settings.py), where flags, TIERLOG_* variables and docs/settings.md come from."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from cluster.authorizer import AuthSettings
from cluster.http.admission import ConcurrencyLimits
from cluster.http.guard import HttpLimits
from cluster.http.limits import LimitSettings
from ingest import settings as table
from ingest.data_limits import DataLimits


class KafkaConnSettings(NamedTuple):
    """The Kafka listener's connection limits before and around authentication
    (ingest/kafka/conn_gate.py, ingest/kafka/frames.py; docs/limits.md)."""

    preauth_max_frame_bytes: int = table.KAFKA_PREAUTH_MAX_FRAME_BYTES.default  # Kafka: 512 KiB
    auth_timeout_ms: int = table.KAFKA_AUTH_TIMEOUT_MS.default  # Java clients: 10 s
    max_preauth_connections: int = table.KAFKA_MAX_PREAUTH_CONNECTIONS.default  # broker-wide
    preauth_inflight_bytes: int = table.KAFKA_PREAUTH_INFLIGHT_BYTES.default  # own budget


class BrokerConfig(NamedTuple):
    broker_id: int
    host: str
    port: int
    advertised_url: str
    data_dir: Path
    database_url: str
    max_request_bytes: int = table.MAX_REQUEST_BYTES.default
    lease_ms: int = table.LEASE_MS.default  # a broker whose lease lapses is dead to the cluster
    heartbeat_ms: int = table.HEARTBEAT_MS.default
    metadata_refresh_ms: int = table.METADATA_REFRESH_MS.default  # NOTIFY normally wakes first
    controller_tick_ms: int = table.CONTROLLER_TICK_MS.default
    replica_lag_ms: int = table.REPLICA_LAG_MS.default  # Kafka's replica.lag.time.max.ms
    request_timeout_ms: int = table.REQUEST_TIMEOUT_MS.default  # acks=all waits this long
    default_partitions: int = table.DEFAULT_PARTITIONS.default
    default_replication_factor: int = table.DEFAULT_REPLICATION_FACTOR.default
    # Configs a new topic gets unless its creator names them (`--topic-default NAME=VALUE`;
    # `tierlog dev` sets small segments): stored as the topic's own at creation.
    topic_defaults: tuple[tuple[str, str], ...] = ()
    tiering_duty_ms: int = table.TIERING_DUTY_MS.default  # registration, local retention
    # Backpressure from tiering (ingest/tiered/untiered_bound.py): sealed bytes not yet in the
    # cold tier above which client produce gets 503 + Retry-After; 0 turns it off.
    max_untiered_bytes: int = table.MAX_UNTIERED_BYTES.default
    cleaner_interval_ms: int = table.CLEANER_INTERVAL_MS.default  # hot key compaction passes
    auth: AuthSettings = AuthSettings()  # API keys + ACLs unless explicitly turned off
    tls_cert: str | None = None  # PEM files: the listener speaks HTTPS when both are set
    tls_key: str | None = None
    # Overload protection (cluster/http/limits.py): Kafka's queued.max.request.bytes, a cap on
    # waiting fetches, and how long a request body may take to arrive (slowloris).
    max_inflight_bytes: int = table.MAX_INFLIGHT_BYTES.default
    max_long_polls: int = table.MAX_LONG_POLLS.default
    request_body_timeout_ms: int = table.REQUEST_BODY_TIMEOUT_MS.default
    # Expansion limits on produce (logformat/expansion.py): what a body may decode to.
    max_request_records: int = table.MAX_REQUEST_RECORDS.default
    max_request_decoded_bytes: int = table.MAX_REQUEST_DECODED_BYTES.default
    max_compression_ratio: float = table.MAX_COMPRESSION_RATIO.default
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
