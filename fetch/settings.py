"""The fetch node's settings table (cluster/settings_table.py): `tierlog fetch`'s flags, its
TIERLOG_* variables and docs/settings.md come from it, and FetchNodeConfig's defaults."""

from __future__ import annotations

from cluster import node_settings as node
from cluster.settings_table import Setting, SettingsTable, at_least

LISTEN = Setting(
    "listen",
    str,
    "127.0.0.1:8090",
    "HOST:PORT of the HTTP listener",
    env="TIERLOG_FETCH_LISTEN",
    metavar="HOST:PORT",
)
REQUEST_TIMEOUT_MS = Setting(
    "request_timeout_ms",
    int,
    30_000,
    "how long a read waits on a replica or the cold tier",
    validate=at_least(1),
)
METADATA_REFRESH_MS = Setting(
    "metadata_refresh_ms",
    int,
    1000,
    "metadata refresh fallback (NOTIFY normally wakes refreshes at once)",
    validate=at_least(1),
)

FETCH = SettingsTable(
    "fetch",
    "A fetch node: consumer reads, cold from S3 and hot through the replicas.",
    (
        LISTEN,
        node.DATABASE_URL,
        *node.LOGGING,
        node.STARTUP_WAIT_S,
        REQUEST_TIMEOUT_MS,
        METADATA_REFRESH_MS,
        *node.SECURITY,
        *node.HTTP_LIMITS,
        *node.CONCURRENCY,
        *node.S3,
        *node.COLD,
    ),
)
