"""The composition root turns a role's resolved settings into the typed config its server
takes (tierlog/cli/node_roles.py, role_settings.py): every flag and variable lands in its
field, those that had no flag before included."""

from __future__ import annotations

import argparse

from cluster.authorizer import AuthSettings
from cluster.settings_table import Settings, SettingsTable
from fetch.settings import FETCH
from ingest.broker_config import BrokerConfig, KafkaConnSettings
from ingest.data_limits import DataLimits
from ingest.settings import BROKER
from tierlog.cli.node_roles import broker_config
from tierlog.cli.role_settings import cold_tier, http_limits, object_store, s3_config


def _resolve(table: SettingsTable, environ: dict[str, str], *argv: str) -> Settings:
    parser = argparse.ArgumentParser()
    table.add_flags(parser)
    return table.resolve(environ, parser.parse_args(list(argv)))


def test_the_broker_config_carries_every_setting() -> None:
    env = {
        "TIERLOG_CLEANER_INTERVAL_MS": "200",
        "TIERLOG_FETCH_MAX_BYTES": "1000",
        "TIERLOG_KAFKA_LISTEN": "127.0.0.1:9092",
        "TIERLOG_IDLE_TIMEOUT_MS": "7000",
    }
    s = _resolve(
        BROKER,
        env,
        *("--lease-ms", "4000", "--tiering-duty-ms", "250", "--controller-tick-ms", "50"),
        *("--kafka-auth-timeout-ms", "3000", "--max-compression-ratio", "7.5"),
        *("--data-dir", "/tmp/b1", "--broker-id", "3"),
    )
    config = broker_config(s, ("127.0.0.1", 8081), AuthSettings(), ())
    assert config == BrokerConfig(
        broker_id=3,
        host="127.0.0.1",
        port=8081,
        advertised_url="http://127.0.0.1:8081",
        data_dir=config.data_dir,
        database_url="",
        lease_ms=4000,
        tiering_duty_ms=250,
        controller_tick_ms=50,
        cleaner_interval_ms=200,
        max_compression_ratio=7.5,
        data_limits=DataLimits(fetch_max_bytes=1000),
        http_limits=config.http_limits,
        kafka_listen=("127.0.0.1", 9092),
        kafka_conn=KafkaConnSettings(auth_timeout_ms=3000),
    )
    assert config.data_dir.name == "b1"
    assert config.http_limits.idle_timeout_s == 7.0


def test_s3_and_the_cold_reader_come_from_the_table_over_aws_variables() -> None:
    s = _resolve(FETCH, {}, "--cold-cache-mb", "8")
    assert object_store(s) is None
    assert cold_tier(s, "postgresql://x/y", None) is None
    s = _resolve(
        FETCH, {"TIERLOG_S3_BUCKET": "b"}, *("--s3-prefix", "/p/", "--s3-endpoint", "http://s")
    )
    store = object_store(s)
    assert store is not None
    assert (store.bucket, store.prefix, store.endpoint_url) == ("b", "p", "http://s")
    assert s3_config(s).bucket == "b"
    assert http_limits(s).max_connections == 4096
