"""`tierlog dev`'s settings table (cluster/settings_table.py). Its flags have no variables
of their own: dev.env (which `tierlog dev` writes) sets TIERLOG_* variables for the roles it
starts, and a shell that sourced it must not change what the next `tierlog dev` does."""

from __future__ import annotations

from cluster.node_settings import valid_log_level
from cluster.settings_table import Setting, SettingsTable, at_least

BROKERS = Setting(
    "brokers",
    int,
    1,
    "brokers to run (new topics get RF min(3, N))",
    env="",
    validate=at_least(1),
)
PORT = Setting(
    "port",
    int,
    8080,
    "first broker's port (the others follow; the fetch node is on PORT+10, the web console "
    "on PORT-10)",
    env="",
    validate=at_least(11),
)
DATA_DIR = Setting(
    "data_dir",
    str,
    ".tierlog",
    "where Postgres, S3, the brokers' logs and dev.env live",
    env="",
    metavar="PATH",
)
AUTH = Setting(
    "auth",
    bool,
    False,
    "require API keys and ACLs, as outside dev; prints an admin key (User:admin)",
    env="",
)
KAFKA_DEFAULTS = Setting(
    "kafka_defaults",
    bool,
    False,
    "new topics get Kafka's segment defaults (segment.bytes 1 GiB, segment.ms 7 days) "
    "instead of dev's 1 MiB and 5 s, which send records to S3 within seconds",
    env="",
)
LOG_LEVEL: Setting[str | None] = Setting(
    "log_level",
    str,
    None,
    "DEBUG, INFO, WARNING or ERROR (none: WARNING on a terminal, so the banner is not lost "
    "among start-up lines; INFO otherwise)",
    env="",
    validate=lambda v: None if v is None else valid_log_level(v),
)
DEV = SettingsTable(
    "dev",
    "The whole system locally on embedded defaults: Postgres, S3, brokers, a fetch node, the "
    "workers and the console. TIERLOG_DATABASE_URL / TIERLOG_S3_ENDPOINT, when set, are used "
    "instead of the embedded ones.",
    (BROKERS, PORT, DATA_DIR, AUTH, KAFKA_DEFAULTS, LOG_LEVEL),
)
