"""The settings tables (cluster/settings_table.py): a flag wins over its variable, which wins
over the default; bad values are refused naming the flag or variable; every variable users
and tests set keeps working; the tables and their config classes agree on defaults."""

from __future__ import annotations

import argparse

import pytest

from cluster.settings_table import Setting, SettingsError, SettingsTable, at_least
from compaction.settings import COMPACTION
from fetch.settings import FETCH
from ingest.broker_config import BrokerConfig
from ingest.settings import BROKER, LEASE_MS
from tiering.settings import TIERING
from tierlog.cli.settings_page import TABLES

PORT = Setting("port", int, 80, "a port", validate=at_least(1))
NAME: Setting[str | None] = Setting("name", str, None, "a name", env="TIERLOG_OLD_NAME")
ON = Setting("on", bool, False, "a switch")
TABLE = SettingsTable("demo", "", (PORT, NAME, ON))


def _args(table: SettingsTable, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"tierlog {table.role}", exit_on_error=False)
    table.add_flags(parser)
    return parser.parse_args(list(argv))


def test_a_flag_wins_over_its_variable_which_wins_over_the_default() -> None:
    assert TABLE.resolve({}, _args(TABLE)).values == {"port": 80, "name": None, "on": False}
    env = {"TIERLOG_PORT": "81", "TIERLOG_OLD_NAME": "n", "TIERLOG_ON": "yes"}
    got = TABLE.resolve(env, _args(TABLE))
    assert (got[PORT], got[NAME], got[ON]) == (81, "n", True)
    assert got.given == {"port", "name", "on"}
    got = TABLE.resolve(env, _args(TABLE, "--port", "82", "--name", "m"))
    assert (got[PORT], got[NAME]) == (82, "m")


def test_an_empty_variable_counts_as_unset() -> None:
    got = TABLE.resolve({"TIERLOG_PORT": " ", "TIERLOG_OLD_NAME": ""}, _args(TABLE))
    assert (got[PORT], got[NAME], got.given) == (80, None, frozenset())


def test_every_bad_variable_is_named_with_why_at_once() -> None:
    env = {"TIERLOG_PORT": "eighty", "TIERLOG_ON": "maybe"}
    with pytest.raises(SettingsError) as caught:
        TABLE.resolve(env, _args(TABLE))
    assert caught.value.problems == [
        "TIERLOG_PORT must be an integer, not 'eighty'",
        "TIERLOG_ON must be one of 1, true, yes, on, 0, false, no, off, not 'maybe'",
    ]


def test_a_value_that_fails_its_check_is_refused_naming_its_source() -> None:
    with pytest.raises(SettingsError, match=r"^tierlog demo: --port must be 1 or more, not 0$"):
        TABLE.resolve({}, _args(TABLE, "--port", "0"))
    with pytest.raises(SettingsError, match="TIERLOG_PORT must be 1 or more, not -3"):
        TABLE.resolve({"TIERLOG_PORT": "-3"}, _args(TABLE))


def test_a_bad_flag_is_an_argparse_error_saying_why() -> None:
    with pytest.raises(argparse.ArgumentError, match="must be an integer, not 'x'"):
        _args(TABLE, "--port", "x")


def test_a_setting_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice: port"):
        SettingsTable("demo", "", (PORT, PORT))


def test_every_role_builds_its_parser_and_resolves_its_defaults() -> None:
    for table in TABLES:
        table.resolve({}, _args(table))  # no clashing flags, every default passes its check
        for s in table.settings:
            assert s.check(s.default) is None, s.name


# What users, scripts and tests set before the tables existed: each still reaches its role.
_EXISTING = {
    BROKER: "BROKER_ID LISTEN ADVERTISED_URL DATA_DIR DATABASE_URL MAX_REQUEST_BYTES LEASE_MS "
    "HEARTBEAT_MS REPLICA_LAG_MS REQUEST_TIMEOUT_MS DEFAULT_REPLICATION_FACTOR TOPIC_DEFAULTS "
    "LOG_LEVEL LOG_FORMAT STARTUP_WAIT_S KAFKA_LISTEN KAFKA_ADVERTISED KAFKA_SASL_SSL_LISTEN "
    "KAFKA_SSL_LISTEN KAFKA_PREAUTH_MAX_FRAME_BYTES KAFKA_AUTH_TIMEOUT_MS "
    "KAFKA_MAX_PREAUTH_CONNECTIONS KAFKA_PREAUTH_INFLIGHT_BYTES AUTH INSECURE SUPER_USERS "
    "AUTH_CACHE_MS TLS_CERT TLS_KEY TLS_CA FAILED_AUTH_FREE FAILED_AUTH_DELAY_MS "
    "FAILED_AUTH_WINDOW_MS FAILED_AUTH_MAX_WAIT_MS MAX_INFLIGHT_BYTES MAX_LONG_POLLS "
    "REQUEST_BODY_TIMEOUT_MS MAX_UNTIERED_BYTES MAX_REQUEST_RECORDS MAX_REQUEST_DECODED_BYTES "
    "MAX_COMPRESSION_RATIO MAX_HEADERS_PER_RECORD MAX_HEADERS_PER_BATCH "
    "MAX_HEADER_BYTES_PER_RECORD MAX_HEADER_BYTES_PER_BATCH FETCH_MAX_BYTES "
    "KAFKA_MAX_CREATE_TOPICS KAFKA_MAX_METADATA_TOPICS KAFKA_MAX_FETCH_PARTITIONS "
    "KAFKA_MAX_LIST_OFFSETS_PARTITIONS MAX_HEADER_BYTES MAX_HEADERS HEADER_TIMEOUT_MS "
    "IDLE_TIMEOUT_MS MAX_CONNECTIONS MAX_CONNECTIONS_PER_ADDRESS MAX_SEARCHES_PER_PRINCIPAL "
    "MAX_SEARCHES MAX_ADMIN_REQUESTS CLEANER_INTERVAL_MS S3_BUCKET S3_PREFIX S3_ENDPOINT "
    "COLD_CACHE_MB COLD_DECODED_MB COLD_PREFETCH_MB COLD_DECODE_THREADS "
    "COLD_MANIFEST_TIMEOUT_MS COLD_S3_TIMEOUT_MS",
    FETCH: "FETCH_LISTEN DATABASE_URL REQUEST_TIMEOUT_MS LOG_LEVEL AUTH INSECURE TLS_CA "
    "MAX_SEARCHES S3_BUCKET S3_ENDPOINT COLD_CACHE_MB COLD_S3_TIMEOUT_MS",
    TIERING: "WORKER_ID DATABASE_URL POLL_MS TIERING_LISTEN LOG_LEVEL TLS_CA TIERING_LEASE_MS "
    "TIERING_BATCH_SEGMENTS TIERING_BATCH_MB TIERING_ENCODE_THREADS TIERING_UPLOAD_THREADS",
    COMPACTION: "WORKER_ID DATABASE_URL COMPACTION_POLL_MS COMPACTION_LISTEN LOG_LEVEL TLS_CA "
    "COMPACTION_TARGET_FILE_BYTES COMPACTION_MIN_GRACE_MS COMPACTION_STALE_UPLOAD_MS",
}


@pytest.mark.parametrize("table", list(_EXISTING), ids=lambda t: t.role)
def test_every_existing_variable_still_works(table: SettingsTable) -> None:
    names = {s.env_name for s in table.settings}
    missing = {f"TIERLOG_{n}" for n in _EXISTING[table].split()} - names
    assert not missing, f"{table.role} lost {sorted(missing)}"


def test_the_cleaner_interval_is_read_at_start_up_not_at_import() -> None:
    """It was read from the environment when ingest.broker_config was imported."""
    got = BROKER.resolve({"TIERLOG_CLEANER_INTERVAL_MS": "200"}, _args(BROKER))
    assert got.values["cleaner_interval_ms"] == 200
    assert BrokerConfig._field_defaults["cleaner_interval_ms"] == 15_000


def test_the_config_classes_take_their_defaults_from_the_tables() -> None:
    defaults = BROKER.defaults()
    config = BrokerConfig._field_defaults
    shared = (set(config) & set(defaults.values)) - {"topic_defaults", "auth"}  # parsed
    assert {"lease_ms", "max_untiered_bytes", "cleaner_interval_ms"} <= shared
    assert {n: config[n] for n in shared} == {n: defaults.values[n] for n in shared}
    assert defaults[LEASE_MS] == BrokerConfig._field_defaults["lease_ms"]
