"""Which brokers Metadata lists (ingest/kafka/cluster_apis.py): the live ones, and a dead one
for Kafka's session timeout after its lease ended, as Kafka lists a killed broker until its
session ends (librdkafka re-finds a coordinator it had cached on it only while it is listed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ingest.kafka.cluster_apis import SESSION_GRACE, _listed
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
