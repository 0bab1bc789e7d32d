"""The cluster id and the controller, as Metadata and DescribeCluster name them.

The cluster id is the one Postgres made for the cluster (it never changes: read once). The
controller is the holder of the controller lease, by the database's clock, as GET /brokers
shows it. While no broker holds it (a lease lapsing under load, an election), the answering
broker names itself, as a KRaft broker names one it can forward to: librdkafka sends topic
admin requests to the controller and, told -1, waits for a Metadata refresh that may not
come before its timeout, while every tierlog broker serves those requests itself (their
state is in Postgres). Clients ask Metadata often, so the holder is kept for a moment rather
than read per request.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.broker import Broker

NO_CONTROLLER = -1  # before the first lookup only
CONTROLLER_TTL_S = 1.0  # a lease moves within a few lease periods anyway


class ClusterIdentity:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._cluster_id: str | None = None
        self._controller = NO_CONTROLLER
        self._controller_at = -CONTROLLER_TTL_S

    async def cluster_id(self) -> str:
        if self._cluster_id is None:
            self._cluster_id = await asyncio.to_thread(self._broker.partition_repo.cluster_id)
        return self._cluster_id

    async def controller_id(self) -> int:
        now = time.monotonic()
        if now - self._controller_at >= CONTROLLER_TTL_S:
            holder, _ = await asyncio.to_thread(self._broker.controller_lease.holder)
            self._controller = self._broker.config.broker_id if holder is None else holder
            self._controller_at = now
        return self._controller
