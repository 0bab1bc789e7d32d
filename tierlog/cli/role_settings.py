"""Where the server roles meet their settings: the environment is handed to the role's table
(cluster/settings_table.py) here and nowhere else, and the process-wide pieces (logging, the
CA bundle node-to-node calls trust, the start-up wait) are set from the result."""

from __future__ import annotations

import argparse
import os
import ssl
import sys
from typing import TYPE_CHECKING

from cluster import node_settings as node
from cluster.settings_table import Settings, SettingsError, SettingsTable

if TYPE_CHECKING:
    from cluster.auth_throttle import ThrottleSettings
    from cluster.http.admission import ConcurrencyLimits
    from cluster.http.guard import HttpLimits
    from cluster.notify_hub import NotifyHub
    from cluster.read_contract import ColdReader
    from coldstore.object_store import ObjectStoreConfig


def resolved(table: SettingsTable, args: argparse.Namespace) -> Settings | None:
    """The role's settings from its flags and the environment; None, after saying what is
    wrong with each bad one, when any cannot be used."""
    try:
        return table.resolve(os.environ, args)
    except SettingsError as exc:
        for problem in exc.problems:
            print(f"tierlog {table.role}: {problem}", file=sys.stderr)
        return None


def start_process(s: Settings, node_name: str | None = None) -> bool:
    """Logging, the trusted CA and the start-up wait of this process; False, after saying
    why, when the CA bundle is unusable."""
    from cluster.dependency_wait import set_startup_wait_s
    from cluster.internal_http import trust_ca
    from tierlog import logs

    if not _usable_ca(s, s.role):
        return False
    logs.setup(s.role, s[node.LOG_LEVEL], node_name, s[node.LOG_FORMAT])
    trust_ca(s[node.TLS_CA])
    set_startup_wait_s(s[node.STARTUP_WAIT_S])
    return True


def _usable_ca(s: Settings, role: str) -> bool:
    path = s[node.TLS_CA]
    if not path:
        return True
    try:
        ssl.create_default_context(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        print(f"tierlog {role}: --tls-ca {path}: {exc}", file=sys.stderr)
        return False
    return True


def object_store(s: Settings) -> ObjectStoreConfig | None:
    """The S3 the role uses: TIERLOG_S3_* (or their flags) over boto3's AWS_* variables; None
    when neither the bucket nor the endpoint is given (no cold tier)."""
    if not node.s3_configured(s):
        return None
    return s3_config(s)


def s3_config(s: Settings) -> ObjectStoreConfig:
    from coldstore.object_store import ObjectStoreConfig

    return ObjectStoreConfig.from_env(os.environ)._replace(
        bucket=s[node.S3_BUCKET],
        prefix=s[node.S3_PREFIX].strip("/"),
        endpoint_url=s[node.S3_ENDPOINT],
    )


def cold_tier(
    s: Settings,
    database_url: str,
    store: ObjectStoreConfig | None,
    notices: NotifyHub | None = None,
) -> ColdReader | None:
    """fetch's cold reader over the async object store, when S3 is configured: how a broker
    serves offsets below its local log start, and how a fetch node reads S3. `notices`: the
    node's LISTEN connection."""
    if store is None:
        return None
    from coldstore.object_store import AsyncObjectStore
    from fetch.cold.cold_tier import ColdTier, ColdTierConfig

    mib = 1 << 20
    base = ColdTierConfig()
    config = base._replace(
        cache_bytes=s[node.COLD_CACHE_MB] * mib,
        decoded_bytes=s[node.COLD_DECODED_MB] * mib,
        decode_threads=s[node.COLD_DECODE_THREADS],
        manifest_timeout_s=s[node.COLD_MANIFEST_TIMEOUT_MS] / 1000,
        s3_timeout_s=s[node.COLD_S3_TIMEOUT_MS] / 1000,
        prefetch=base.prefetch._replace(window_bytes=s[node.COLD_PREFETCH_MB] * mib),
    )
    return ColdTier(database_url, AsyncObjectStore(store), config, notices)


def throttle_settings(s: Settings) -> ThrottleSettings:
    from cluster.auth_throttle import ThrottleSettings

    return ThrottleSettings(
        free=s[node.FAILED_AUTH_FREE],
        delay_ms=s[node.FAILED_AUTH_DELAY_MS],
        window_ms=s[node.FAILED_AUTH_WINDOW_MS],
        max_wait_ms=s[node.FAILED_AUTH_MAX_WAIT_MS],
    )


def http_limits(s: Settings) -> HttpLimits:
    from cluster.http.guard import HttpLimits

    return HttpLimits(
        max_header_bytes=s[node.MAX_HEADER_BYTES],
        max_headers=s[node.MAX_HEADERS],
        header_timeout_s=s[node.HEADER_TIMEOUT_MS] / 1000,
        idle_timeout_s=s[node.IDLE_TIMEOUT_MS] / 1000,
        max_connections=s[node.MAX_CONNECTIONS],
        max_connections_per_address=s[node.MAX_CONNECTIONS_PER_ADDRESS],
    )


def concurrency_limits(s: Settings) -> ConcurrencyLimits:
    from cluster.http.admission import ConcurrencyLimits

    return ConcurrencyLimits(
        s[node.MAX_SEARCHES_PER_PRINCIPAL], s[node.MAX_SEARCHES], s[node.MAX_ADMIN_REQUESTS]
    )
