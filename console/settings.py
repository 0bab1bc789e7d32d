"""The web console's settings table (cluster/settings_table.py): `tierlog console`'s flags,
its TIERLOG_* variables and docs/settings.md come from it."""

from __future__ import annotations

from typing import Any

from cluster import node_settings as node
from cluster.settings_table import Setting, SettingsTable
from console.sessions import DEFAULT_IDLE_S, DEFAULT_TTL_S

DEFAULT_URL = "http://127.0.0.1:8080"
LOG_LEVEL, LOG_FORMAT = node.LOG_LEVEL, node.LOG_FORMAT


def _sample(value: float) -> str | None:
    return None if 0.5 <= value <= 300 else "must be 0.5 to 300 seconds"


def _http_url(value: str) -> str | None:
    return None if value.startswith(("http://", "https://")) else "wants an http(s) URL"


BROKER = Setting(
    "broker",
    str,
    DEFAULT_URL,
    "URL of any node of the cluster",
    env="TIERLOG_URL",
    validate=_http_url,
    metavar="URL",
)
LISTEN = Setting(
    "listen",
    str,
    "127.0.0.1:8070",
    "HOST:PORT to serve the console on",
    env="TIERLOG_CONSOLE_LISTEN",
    metavar="HOST:PORT",
)
API_KEY: Setting[str | None] = Setting(
    "api_key",
    str,
    None,
    "key the metric sampler lists brokers with when the cluster requires keys; users sign "
    "in with their own",
)
CA_FILE: Setting[str | None] = Setting(
    "ca_file",
    str,
    None,
    "CA bundle that signed the nodes' TLS certificates (default: the system's)",
    metavar="PATH",
)
SAMPLE_INTERVAL = Setting(
    "sample_interval",
    float,
    5.0,
    "seconds between scrapes of the brokers' metrics for the charts",
    env="TIERLOG_CONSOLE_SAMPLE_INTERVAL",
    validate=_sample,
)
SESSION_TTL = Setting(
    "session_ttl",
    float,
    DEFAULT_TTL_S,
    "seconds a sign-in lasts, used or not",
    env="TIERLOG_CONSOLE_SESSION_TTL",
)
SESSION_IDLE = Setting(
    "session_idle",
    float,
    DEFAULT_IDLE_S,
    "seconds without a request that end a sign-in (0 < idle <= ttl)",
    env="TIERLOG_CONSOLE_SESSION_IDLE",
)
_OWN: tuple[Setting[Any], ...] = (
    BROKER,
    LISTEN,
    API_KEY,
    CA_FILE,
    SAMPLE_INTERVAL,
    SESSION_TTL,
    SESSION_IDLE,
)

CONSOLE = SettingsTable(
    "console",
    "The web console, a client of any node's public HTTP API.",
    (*_OWN, *node.LOGGING),
)
