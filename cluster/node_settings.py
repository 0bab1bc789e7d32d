"""Settings several roles share (cluster/settings_table.py): logging, Postgres, start-up
waits, security, HTTP connection limits, concurrency limits, S3 and the cold-tier reader.
Each role's table (ingest/settings.py, fetch/settings.py, ...) lists the ones it takes.
The config classes (HttpLimits, ConcurrencyLimits, ThrottleSettings) take their defaults
from here; this module imports nothing else, so every command's parser may be built from it
and the console may use its logging settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cluster.settings_table import Setting, Settings, at_least, one_of

if TYPE_CHECKING:  # the tables stay light: every command's parser is built from them
    pass

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def valid_log_level(value: str) -> str | None:
    return None if value.upper() in _LEVELS else f"must be one of {', '.join(_LEVELS)}"


DATABASE_URL: Setting[str | None] = Setting(
    "database_url", str, None, "Postgres URL of the metadata (required)", metavar="URL"
)
LOG_LEVEL = Setting(
    "log_level", str, "INFO", "DEBUG, INFO, WARNING or ERROR", validate=valid_log_level
)
LOG_FORMAT = Setting(
    "log_format",
    str,
    "auto",
    "json (one object a line) or console; auto: console on a terminal, else json",
    validate=one_of("auto", "json", "console"),
)
STARTUP_WAIT_S = Setting(
    "startup_wait_s",
    float,
    60.0,
    "seconds a starting node waits for Postgres or S3 before it exits non-zero",
    validate=at_least(0),
)
TLS_CA: Setting[str | None] = Setting(
    "tls_ca",
    str,
    None,
    "PEM CA bundle that calls to other nodes trust (a cluster's private CA)",
    metavar="PATH",
)
LOGGING = (LOG_LEVEL, LOG_FORMAT)

# Security (cluster/authorizer.py; docs/security.md).
AUTH = Setting(
    "auth",
    str,
    "apikey",
    "client authentication: apikey, or none (needs --insecure too)",
    validate=lambda v: None if v in ("apikey", "none") else "must be apikey or none",
)
INSECURE = Setting(
    "insecure",
    bool,
    False,
    "run with no authentication or ACLs: every client may do anything (dev only)",
)
SUPER_USERS = Setting(
    "super_users",
    str,
    "",
    "principals allowed everything, e.g. User:admin;User:ops (Kafka's super.users)",
)
AUTH_CACHE_MS = Setting(
    "auth_cache_ms",
    int,
    5000,
    "how long verified keys and ACLs are cached (revocation takes at most this)",
    validate=at_least(0),
)
TLS_CERT: Setting[str | None] = Setting(
    "tls_cert", str, None, "PEM certificate: serve HTTPS", metavar="PATH"
)
TLS_KEY: Setting[str | None] = Setting(
    "tls_key", str, None, "PEM private key of --tls-cert", metavar="PATH"
)
FAILED_AUTH_FREE = Setting(
    "failed_auth_free",
    int,
    3,
    "failed logins per address or key id (within --failed-auth-window-ms) before that "
    "source's attempts take turns",
    validate=at_least(0),
)
FAILED_AUTH_DELAY_MS = Setting(
    "failed_auth_delay_ms",
    int,
    1000,
    "once a source has failed too often: one attempt per this (Kafka's "
    "connection.failed.authentication.delay.ms is one model)",
    validate=at_least(0),
)
FAILED_AUTH_WINDOW_MS = Setting(
    "failed_auth_window_ms", int, 60_000, "how long a failed login counts"
)
FAILED_AUTH_MAX_WAIT_MS = Setting(
    "failed_auth_max_wait_ms",
    int,
    5000,
    "an attempt whose turn is further off is refused at once (HTTP 429 + Retry-After)",
)
SECURITY: tuple[Setting[Any], ...] = (
    AUTH,
    INSECURE,
    SUPER_USERS,
    AUTH_CACHE_MS,
    TLS_CERT,
    TLS_KEY,
    TLS_CA,
    FAILED_AUTH_FREE,
    FAILED_AUTH_DELAY_MS,
    FAILED_AUTH_WINDOW_MS,
    FAILED_AUTH_MAX_WAIT_MS,
)


# HTTP connection limits, checked while a request's head is parsed (cluster/http/guard.py).
MAX_HEADER_BYTES = Setting(
    "max_header_bytes",
    int,
    32 * 1024,
    "request line and headers together; more gets 431 and the connection is closed",
    validate=at_least(1),
)
MAX_HEADERS = Setting(
    "max_headers",
    int,
    100,
    "header fields in one request; more gets 431 and the connection is closed",
    validate=at_least(1),
)
HEADER_TIMEOUT_MS = Setting(
    "header_timeout_ms",
    int,
    10_000,
    "a new connection or request must send its whole head within this, else 408 (or, if "
    "it sent nothing, a silent close)",
    validate=at_least(1),
)
IDLE_TIMEOUT_MS = Setting(
    "idle_timeout_ms",
    int,
    5000,
    "a keep-alive connection idle this long between requests is closed",
    validate=at_least(1),
)
MAX_CONNECTIONS = Setting(
    "max_connections",
    int,
    4096,
    "open connections (and requests) at once; more get 503, except /healthz and /readyz, "
    "which keep a small reserve",
    validate=at_least(1),
)
MAX_CONNECTIONS_PER_ADDRESS = Setting(
    "max_connections_per_address",
    int,
    512,
    "open connections from one client IP address; more get 429 and are closed",
    validate=at_least(1),
)
HTTP_LIMITS: tuple[Setting[Any], ...] = (
    MAX_HEADER_BYTES,
    MAX_HEADERS,
    HEADER_TIMEOUT_MS,
    IDLE_TIMEOUT_MS,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_ADDRESS,
)


# Concurrency limits (cluster/http/admission.py).
MAX_SEARCHES_PER_PRINCIPAL = Setting(
    "max_searches_per_principal",
    int,
    4,
    "searches one principal may run at once on this node; more get 429 + Retry-After",
    validate=at_least(1),
)
MAX_SEARCHES = Setting(
    "max_searches",
    int,
    16,
    "searches running at once on this node; more get 429 + Retry-After",
    validate=at_least(1),
)
MAX_ADMIN_REQUESTS = Setting(
    "max_admin_requests",
    int,
    4,
    "topic creates, deletes, config changes and partition adds running at once on this "
    "node (HTTP); more get 429 + Retry-After",
    validate=at_least(1),
)
CONCURRENCY: tuple[Setting[Any], ...] = (
    MAX_SEARCHES_PER_PRINCIPAL,
    MAX_SEARCHES,
    MAX_ADMIN_REQUESTS,
)


# S3 (coldstore/object_store.py; ObjectStoreConfig's defaults). Credentials and the region
# stay boto3's own AWS_* variables.
S3_BUCKET = Setting("s3_bucket", str, "tierlog", "the bucket of the cold tier")
S3_PREFIX = Setting("s3_prefix", str, "", "key prefix under the bucket (none: the bucket's root)")
S3_ENDPOINT: Setting[str | None] = Setting(
    "s3_endpoint",
    str,
    None,
    "S3 endpoint URL (none: AWS S3); TIERLOG_S3_ENDPOINT or TIERLOG_S3_BUCKET set means the "
    "cold tier is configured",
    metavar="URL",
)
S3: tuple[Setting[Any], ...] = (S3_BUCKET, S3_PREFIX, S3_ENDPOINT)


def s3_configured(s: Settings) -> bool:
    return bool({S3_BUCKET.name, S3_ENDPOINT.name} & s.given)


# The worker roles (`tierlog tiering`, `tierlog compaction`) share one shape
# (tierlog/cli/worker_roles.py).
WORKER_ID: Setting[str | None] = Setting(
    "worker_id", str, None, "this worker's id in claims and logs (default: ROLE-HOST-PID)"
)
POLL_MS = "poll_ms"
WORKER_LISTEN = "listen"


def worker_settings(
    role: str,
    poll_env: str,
    poll_ms: int,
    poll_doc: str = "how often the worker looks for work when it found none",
) -> tuple[Setting[Any], ...]:
    """What every worker role takes; `poll_env` keeps each role's older variable name."""
    return (
        WORKER_ID,
        DATABASE_URL,
        Setting(
            POLL_MS,
            int,
            poll_ms,
            poll_doc,
            env=poll_env,
            validate=at_least(1),
        ),
        _optional(
            WORKER_LISTEN,
            "HOST:PORT serving /metrics and /healthz (default: none)",
            env=f"TIERLOG_{role.upper()}_LISTEN",
            metavar="HOST:PORT",
        ),
        *LOGGING,
        STARTUP_WAIT_S,
        TLS_CA,
        *S3,
    )


def _optional(name: str, doc: str, **kw: Any) -> Setting[str | None]:
    return Setting(name, str, None, doc, **kw)


# The cold-tier reader of brokers and fetch nodes (fetch/cold/cold_tier.py's ColdTierConfig).
COLD_CACHE_MB = Setting(
    "cold_cache_mb",
    int,
    256,
    "MiB of raw S3 byte ranges cached (demand reads and prefetch): the reader's memory bound",
    validate=at_least(1),
)
COLD_DECODED_MB = Setting(
    "cold_decoded_mb", int, 128, "MiB of decoded row groups cached", validate=at_least(1)
)
COLD_PREFETCH_MB = Setting(
    "cold_prefetch_mb",
    int,
    64,
    "MiB a sequential cold reader is read ahead (the prefetch window)",
    validate=at_least(0),
)
COLD_DECODE_THREADS = Setting(
    "cold_decode_threads", int, 2, "threads decoding Parquet row groups", validate=at_least(1)
)
COLD_MANIFEST_TIMEOUT_MS = Setting(
    "cold_manifest_timeout_ms",
    int,
    5000,
    "a cold manifest query (Postgres) is waited for at most this, else REQUEST_TIMED_OUT",
    validate=at_least(1),
)
COLD_S3_TIMEOUT_MS = Setting(
    "cold_s3_timeout_ms",
    int,
    20_000,
    "one ranged S3 GET, retries included, is waited for at most this",
    validate=at_least(1),
)
COLD: tuple[Setting[Any], ...] = (
    COLD_CACHE_MB,
    COLD_DECODED_MB,
    COLD_PREFETCH_MB,
    COLD_DECODE_THREADS,
    COLD_MANIFEST_TIMEOUT_MS,
    COLD_S3_TIMEOUT_MS,
)
