"""What a broker is given rather than makes: built by the composition root (ingest/server.py
for a broker process, tests/harness/ for brokers sharing a process and a manual clock)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry
from sqlalchemy.engine import Engine

from cluster.clock import SYSTEM_CLOCK, Clock
from cluster.internal_http import PeerLink, internal_transport
from cluster.notify_hub import NotifyHub
from ingest.broker_config import BrokerConfig
from metadata.brokers import session_url
from metadata.db import make_engine


def broker_notices(config: BrokerConfig) -> NotifyHub:
    """A broker's LISTEN connection, connecting as its named session (metadata.brokers):
    the death signal reads that session as "this broker's process lives"."""
    return NotifyHub(session_url(config.database_url, config.broker_id))


@dataclass(frozen=True)
class BrokerDeps:
    engine: Engine  # Postgres: no connection is made until the broker starts
    clock: Clock = SYSTEM_CLOCK  # leases, replica lag, log reopen backoff, segment ages
    # The node's metrics registry (ingest/metrics.py ReplicationMetrics and any component
    # that registers per-node metrics): the process default, so /metrics is as before.
    registry: CollectorRegistry = REGISTRY
    peer_link: PeerLink = internal_transport  # to other brokers: replica fetches, forwarding
    # The node's one LISTEN connection, as its named session (metadata.brokers.session_url);
    # None: the broker makes it. The cold reader, built before the broker, shares it.
    notices: NotifyHub | None = None

    @classmethod
    def of_process(cls, config: BrokerConfig, notices: NotifyHub | None = None) -> BrokerDeps:
        """A broker process's: the engine on its database URL, the system clock, the default
        registry, HTTP between brokers."""
        return cls(make_engine(config.database_url), notices=notices)
