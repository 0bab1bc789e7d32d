"""What a broker is given rather than makes: built by the composition root (ingest/server.py
for a broker process, tests/harness/ for brokers sharing a process and a manual clock)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry
from sqlalchemy.engine import Engine

from cluster.clock import SYSTEM_CLOCK, Clock
from ingest.broker_config import BrokerConfig
from ingest.replication.replica_fetcher import INTERNAL_LINK, ReplicaLink
from metadata.db import make_engine


@dataclass(frozen=True)
class BrokerDeps:
    engine: Engine  # Postgres: no connection is made until the broker starts
    clock: Clock = SYSTEM_CLOCK  # leases, replica lag, log reopen backoff, segment ages
    # The node's metrics registry (ingest/metrics.py ReplicationMetrics and any component
    # that registers per-node metrics): the process default, so /metrics is as before.
    registry: CollectorRegistry = REGISTRY
    replica_link: ReplicaLink = INTERNAL_LINK  # how its followers reach their leaders

    @classmethod
    def of_process(cls, config: BrokerConfig) -> BrokerDeps:
        """A broker process's: the engine on its database URL, the system clock, the default
        registry, HTTP between brokers."""
        return cls(make_engine(config.database_url))
