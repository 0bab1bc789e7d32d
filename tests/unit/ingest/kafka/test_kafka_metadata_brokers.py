"""Which brokers Metadata lists (ingest/kafka/cluster_apis.py): the live ones, and a dead one
for Kafka's session timeout after its lease ended, as Kafka lists a killed broker until its
session ends (librdkafka re-finds a coordinator it had cached on it only while it is listed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

from ingest.kafka.cluster_apis import SESSION_GRACE, _alive, _listed
from metadata.types import BrokerRegistration

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _broker(alive: bool, lease_ended_ago: timedelta) -> BrokerRegistration:
    return BrokerRegistration(1, "http://b1:8080", alive, NOW - lease_ended_ago)


def test_a_live_broker_is_listed() -> None:
    assert _listed(_broker(True, -timedelta(seconds=3)), NOW)


def test_a_broker_killed_a_moment_ago_is_still_listed() -> None:
    assert _listed(_broker(False, timedelta(seconds=1)), NOW)


def test_a_broker_dead_longer_than_kafkas_session_timeout_is_not() -> None:
    assert timedelta(seconds=9) == SESSION_GRACE  # broker.session.timeout.ms's default
    assert not _listed(_broker(False, SESSION_GRACE + timedelta(seconds=1)), NOW)


def test_a_controller_is_named_among_live_brokers_only() -> None:
    """A killed broker stays listed, but naming it controller would send ElectLeaders to a
    broker that never answers (librdkafka waits for the named controller)."""
    brokers = {
        1: _broker(False, timedelta(seconds=1)),  # killed a moment ago: listed, not alive
        2: _broker(True, -timedelta(seconds=3))._replace(id=2),
        3: _broker(True, -timedelta(seconds=3))._replace(id=3),  # no Kafka address
    }
    addresses = {1: ("127.0.0.1", 9092), 2: ("127.0.0.1", 9093)}
    ctx = SimpleNamespace(
        services=SimpleNamespace(metadata=SimpleNamespace(brokers=brokers)),
        kafka_address=addresses.get,
    )
    assert _alive(cast(Any, ctx)) == [2]
