"""The broker's settings table (cluster/settings_table.py): `tierlog broker`'s flags, its
TIERLOG_* variables and docs/settings.md come from it, and BrokerConfig's defaults are these.
"""

from __future__ import annotations

from typing import Any

from cluster import node_settings as node
from cluster.settings_table import Setting, SettingsTable, at_least

BROKER_ID = Setting("broker_id", int, 1, "this broker's id, unique in the cluster")
LISTEN = Setting(
    "listen", str, "127.0.0.1:8080", "HOST:PORT of the HTTP listener", metavar="HOST:PORT"
)
ADVERTISED_URL: Setting[str | None] = Setting(
    "advertised_url",
    str,
    None,
    "URL other nodes and clients use (default: http(s)://LISTEN)",
    metavar="URL",
)
DATA_DIR = Setting("data_dir", str, ".tierlog/broker-1", "where the hot log lives", metavar="PATH")
MAX_REQUEST_BYTES = Setting(
    "max_request_bytes",
    int,
    64 * 1024 * 1024,
    "largest request body; more gets 413",
    validate=at_least(1),
)
LEASE_MS = Setting(
    "lease_ms",
    int,
    3000,
    "broker lease: a broker silent this long is dead to the cluster",
    validate=at_least(1),
)
HEARTBEAT_MS = Setting(
    "heartbeat_ms", int, 500, "how often the broker renews its lease", validate=at_least(1)
)
METADATA_REFRESH_MS = Setting(
    "metadata_refresh_ms",
    int,
    1000,
    "metadata refresh fallback (NOTIFY normally wakes refreshes at once)",
    validate=at_least(1),
)
CONTROLLER_TICK_MS = Setting(
    "controller_tick_ms",
    int,
    500,
    "how often the controller looks when nothing has changed (a new metadata version or a "
    "broker found dead wakes it at once)",
    validate=at_least(1),
)
REPLICA_LAG_MS = Setting(
    "replica_lag_ms",
    int,
    10_000,
    "replica.lag.time.max.ms: a follower this far behind leaves the ISR (30 s in Kafka)",
    validate=at_least(1),
)
REQUEST_TIMEOUT_MS = Setting(
    "request_timeout_ms",
    int,
    30_000,
    "how long acks=all waits for the ISR",
    validate=at_least(1),
)
DEFAULT_PARTITIONS = Setting(
    "default_partitions",
    int,
    1,
    "partitions of a topic created without a count",
    validate=at_least(1),
)
DEFAULT_REPLICATION_FACTOR = Setting(
    "default_replication_factor",
    int,
    1,
    "replication factor of a topic created without one",
    validate=at_least(1),
)
TOPIC_DEFAULTS = Setting(
    "topic_defaults",
    str,
    "",
    "configs new topics get unless their creator sets them (Kafka's broker-level "
    "log.segment.bytes, ...): NAME=VALUE,NAME=VALUE; the flag is --topic-default NAME=VALUE, "
    "repeatable",
    flag="",
)
TIERING_DUTY_MS = Setting(
    "tiering_duty_ms",
    int,
    1000,
    "segment registration and local retention run this often",
    validate=at_least(1),
)
MAX_UNTIERED_BYTES = Setting(
    "max_untiered_bytes",
    int,
    8 * 1024**3,
    "sealed bytes on this broker not yet copied to the cold tier; above it, client produce "
    "to the lagging partitions gets 503 THROTTLING_QUOTA_EXCEEDED + Retry-After until "
    "tiering catches up (0: no bound)",
    validate=at_least(0),
)
CLEANER_INTERVAL_MS = Setting(
    "cleaner_interval_ms",
    int,
    15_000,
    "the log cleaner's pass interval (hot key compaction)",
    validate=at_least(1),
)
MAX_INFLIGHT_BYTES = Setting(
    "max_inflight_bytes",
    int,
    256 * 1024 * 1024,
    "request body bytes handled at once; more waits 1 s, then 503 + Retry-After (Kafka's "
    "queued.max.request.bytes)",
    validate=at_least(1),
)
MAX_LONG_POLLS = Setting(
    "max_long_polls",
    int,
    1024,
    "fetches waiting for data at once (wait_ms > 0); more get 503 + Retry-After",
    validate=at_least(1),
)
REQUEST_BODY_TIMEOUT_MS = Setting(
    "request_body_timeout_ms",
    int,
    30_000,
    "a request body must arrive within this, else 408 and the connection is closed",
    validate=at_least(1),
)
MAX_REQUEST_RECORDS = Setting(
    "max_request_records",
    int,
    1_000_000,
    "records in one produce request (Arrow or JSON), counted before decoding; more gets "
    "413 RECORD_LIST_TOO_LARGE",
    validate=at_least(1),
)
MAX_REQUEST_DECODED_BYTES = Setting(
    "max_request_decoded_bytes",
    int,
    128 * 1024 * 1024,
    "what an Arrow produce body may decode to (decompressed, dictionaries expanded); more "
    "gets 413 MESSAGE_TOO_LARGE",
    validate=at_least(1),
)
MAX_COMPRESSION_RATIO = Setting(
    "max_compression_ratio",
    float,
    100.0,
    "decoded size / body size of a produce request decoding to over 1 MiB; more gets 413 "
    "MESSAGE_TOO_LARGE",
    validate=at_least(1),
)

# Data-path limits both protocols share (ingest/service/; docs/limits.md).
DATA_LIMITS: tuple[Setting[int], ...] = (
    Setting(
        "max_headers_per_record",
        int,
        1_000,
        "headers on one record (Kafka and HTTP produce); more gets INVALID_RECORD / 400",
        validate=at_least(0),
    ),
    Setting(
        "max_headers_per_batch",
        int,
        100_000,
        "headers on all records of one batch (Kafka) or request (HTTP)",
        validate=at_least(0),
    ),
    Setting(
        "max_header_bytes_per_record",
        int,
        1024 * 1024,
        "bytes of one record's headers (keys and values)",
        validate=at_least(0),
    ),
    Setting(
        "max_header_bytes_per_batch",
        int,
        16 * 1024 * 1024,
        "bytes of all headers of one batch (Kafka) or request (HTTP)",
        validate=at_least(0),
    ),
    Setting(
        "fetch_max_bytes",
        int,
        55 * 1024 * 1024,  # Kafka's fetch.max.bytes default
        "the most one fetch answers, whatever it asks (Kafka's fetch.max.bytes); HTTP's "
        "max_bytes is lowered to it too",
        validate=at_least(1),
    ),
    Setting(
        "max_create_topics",
        int,
        1_000,
        "topics in one CreateTopics request; more: INVALID_REQUEST, none created",
        flag="--kafka-max-create-topics",
        env="TIERLOG_KAFKA_MAX_CREATE_TOPICS",
        validate=at_least(1),
    ),
    Setting(
        "max_metadata_topics",
        int,
        10_000,
        "topics named in one Metadata request (asking for all is not bounded)",
        flag="--kafka-max-metadata-topics",
        env="TIERLOG_KAFKA_MAX_METADATA_TOPICS",
        validate=at_least(1),
    ),
    Setting(
        "max_fetch_partitions",
        int,
        10_000,
        "partitions in one Fetch request",
        flag="--kafka-max-fetch-partitions",
        env="TIERLOG_KAFKA_MAX_FETCH_PARTITIONS",
        validate=at_least(1),
    ),
    Setting(
        "max_list_offsets_partitions",
        int,
        10_000,
        "partitions in one ListOffsets request",
        flag="--kafka-max-list-offsets-partitions",
        env="TIERLOG_KAFKA_MAX_LIST_OFFSETS_PARTITIONS",
        validate=at_least(1),
    ),
)

# The Kafka listeners (ingest/kafka/; docs/limits.md "Kafka listener: connections").
KAFKA_LISTEN: Setting[str | None] = Setting(
    "kafka_listen",
    str,
    None,
    "HOST:PORT of the Kafka wire-protocol listener (off unless given)",
    metavar="HOST:PORT",
)
KAFKA_ADVERTISED: Setting[str | None] = Setting(
    "kafka_advertised",
    str,
    None,
    "HOST:PORT Kafka clients are told to use for this broker (default: the listen address); "
    "registered, so every broker's Metadata names it",
    metavar="HOST:PORT",
)
KAFKA_SASL_SSL_LISTEN: Setting[str | None] = Setting(
    "kafka_sasl_ssl_listen",
    str,
    None,
    "HOST:PORT of a SASL_SSL Kafka listener (TLS with --tls-cert/--tls-key, then SASL PLAIN "
    "or SCRAM)",
    metavar="HOST:PORT",
)
KAFKA_SSL_LISTEN: Setting[str | None] = Setting(
    "kafka_ssl_listen",
    str,
    None,
    "HOST:PORT of an SSL Kafka listener (TLS only: clients are User:ANONYMOUS to the ACLs)",
    metavar="HOST:PORT",
)
KAFKA_PREAUTH_MAX_FRAME_BYTES = Setting(
    "kafka_preauth_max_frame_bytes",
    int,
    512 * 1024,
    "largest Kafka request frame before SASL authentication (Kafka: 512 KiB); larger closes "
    "the connection",
    validate=at_least(1),
)
KAFKA_AUTH_TIMEOUT_MS = Setting(
    "kafka_auth_timeout_ms",
    int,
    10_000,
    "a Kafka connection (TLS handshake included) must authenticate within this, else it is closed",
    validate=at_least(1),
)
KAFKA_MAX_PREAUTH_CONNECTIONS = Setting(
    "kafka_max_preauth_connections",
    int,
    1024,
    "Kafka connections not yet authenticated, broker-wide; more are refused",
    validate=at_least(1),
)
KAFKA_PREAUTH_INFLIGHT_BYTES = Setting(
    "kafka_preauth_inflight_bytes",
    int,
    16 * 1024 * 1024,
    "request bytes in flight before authentication (apart from --max-inflight-bytes)",
    validate=at_least(1),
)
KAFKA: tuple[Setting[Any], ...] = (
    KAFKA_LISTEN,
    KAFKA_ADVERTISED,
    KAFKA_SASL_SSL_LISTEN,
    KAFKA_SSL_LISTEN,
    KAFKA_PREAUTH_MAX_FRAME_BYTES,
    KAFKA_AUTH_TIMEOUT_MS,
    KAFKA_MAX_PREAUTH_CONNECTIONS,
    KAFKA_PREAUTH_INFLIGHT_BYTES,
)

BROKER = SettingsTable(
    "broker",
    "One broker: HTTP produce and fetch, the hot log, replication, the Kafka listeners.",
    (
        BROKER_ID,
        LISTEN,
        ADVERTISED_URL,
        DATA_DIR,
        node.DATABASE_URL,
        *node.LOGGING,
        node.STARTUP_WAIT_S,
        MAX_REQUEST_BYTES,
        LEASE_MS,
        HEARTBEAT_MS,
        METADATA_REFRESH_MS,
        CONTROLLER_TICK_MS,
        REPLICA_LAG_MS,
        REQUEST_TIMEOUT_MS,
        DEFAULT_PARTITIONS,
        DEFAULT_REPLICATION_FACTOR,
        TOPIC_DEFAULTS,
        TIERING_DUTY_MS,
        MAX_UNTIERED_BYTES,
        CLEANER_INTERVAL_MS,
        MAX_INFLIGHT_BYTES,
        MAX_LONG_POLLS,
        REQUEST_BODY_TIMEOUT_MS,
        MAX_REQUEST_RECORDS,
        MAX_REQUEST_DECODED_BYTES,
        MAX_COMPRESSION_RATIO,
        *DATA_LIMITS,
        *KAFKA,
        *node.SECURITY,
        *node.HTTP_LIMITS,
        *node.CONCURRENCY,
        *node.S3,
        *node.COLD,
    ),
)
