"""The Kafka address a broker registers and Metadata names it by (ingest/broker_config.py)."""

from __future__ import annotations

from pathlib import Path

from ingest.broker_config import BrokerConfig, kafka_advertised


def _config(**kafka: tuple[str, int] | None) -> BrokerConfig:
    return BrokerConfig(1, "0.0.0.0", 8080, "http://broker-1:8080", Path("d"), "pg", **kafka)


def test_no_listener_no_address() -> None:
    assert kafka_advertised(_config()) is None


def test_the_listen_address_unless_advertised() -> None:
    assert kafka_advertised(_config(kafka_listen=("127.0.0.1", 9092))) == ("127.0.0.1", 9092)
    given = _config(kafka_listen=("0.0.0.0", 9092), kafka_advertised=("127.0.0.1", 9093))
    assert kafka_advertised(given) == ("127.0.0.1", 9093)  # compose: the host's published port


def test_a_wildcard_listener_takes_the_advertised_urls_host() -> None:
    assert kafka_advertised(_config(kafka_listen=("0.0.0.0", 9092))) == ("broker-1", 9092)
    assert kafka_advertised(_config(kafka_listen=("::", 9092))) == ("broker-1", 9092)
