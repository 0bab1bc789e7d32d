"""This broker as the operations routes show it (ingest/api/ops.py): ready or not and why,
its metrics registry, the cluster's brokers and which holds the controller lease."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ingest.broker import Broker
    from metadata.types import BrokerRegistration


class Readiness:
    def __init__(self, ready: bool, status: str, body: dict[str, object]) -> None:
        self.ready, self.status, self.body = ready, status, body


class NodeStatus:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def readiness(self) -> Readiness:
        """Ready means a member of the cluster: started, metadata loaded and the lease
        current. A broker whose lease lapsed (slow start, Postgres unreachable) is dead to
        the others. Still ready with offline logs (it serves its other partitions), but it
        says which."""
        broker = self._broker
        me = broker.config.broker_id
        started = broker.ready and broker.cache.loaded
        if started and broker.lease_ok():
            body: dict[str, object] = {"status": "ready", "broker_id": me}
            replicas = broker.replicas
            if replicas is not None and replicas.offline():
                body["offline_partitions"] = replicas.offline()
                body["offline_reasons"] = replicas.offline_reasons()  # e.g. "disk full"
            return Readiness(True, "ready", body)
        status = "lease lapsed" if started else "starting"
        return Readiness(False, status, {"status": status, "broker_id": me})

    @property
    def registry(self) -> CollectorRegistry:
        """This node's metrics (its own registry when several brokers share a process)."""
        return self._broker.registry

    @property
    def auth_enabled(self) -> bool:
        return self._broker.config.auth.enabled

    async def brokers(self) -> tuple[list[BrokerRegistration], int | None]:
        """The registered brokers, and the holder of the controller lease by the database's
        clock (None while it is free, expired or held by a dead broker)."""
        infos = await asyncio.to_thread(self._broker.brokers.list)
        controller, _ = await asyncio.to_thread(self._broker.controller_lease.holder)
        return infos, controller
