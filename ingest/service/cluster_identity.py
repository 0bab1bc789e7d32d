"""The cluster id and the controller, as Metadata and DescribeCluster name them.

The cluster id is the one Postgres made for the cluster (it never changes: the broker reads
it as it starts, so a Metadata answer never waits on Postgres: a broker restarted while
Postgres was away closed Kafka connections on it in the 30-minute soak, seed 2911). The
controller is the holder of the controller lease, by the database's clock, as GET /brokers
shows it, read for each answer and named only if that answer also lists it among the live
brokers. Clients send controller-bound admin requests (ElectLeaders, CreateTopics, ...) to
the broker named, and librdkafka, given a controller id it cannot reach, waits for that
broker until its request times out without asking Metadata again: a stopped controller
named for one second (a cached holder) cost a whole ElectLeaders call. Kafka never names a
dead controller. When the holder is not listed (a lease lapsing, a broker shutting down, an
election under way, Postgres away) the answering broker names itself, as a KRaft broker
names one it can forward to: every tierlog broker serves those requests itself (their state
is in Postgres).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import TYPE_CHECKING

from metadata.db_errors import POSTGRES_DOWN

if TYPE_CHECKING:
    from ingest.broker import Broker


NO_CONTROLLER = -1  # only when the answer lists no live broker at all


class ClusterIdentity:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def cluster_id(self) -> str:
        if not self._broker.cluster_id:  # not started yet
            self._broker.cluster_id = await asyncio.to_thread(
                self._broker.partition_repo.cluster_id
            )
        return self._broker.cluster_id

    async def controller_id(self, listed: Collection[int]) -> int:
        """The controller an answer listing the live brokers `listed` names: the lease
        holder if listed, else this broker if listed, else the lowest listed."""
        try:
            holder, _ = await asyncio.to_thread(self._broker.controller_lease.holder)
        except POSTGRES_DOWN:
            holder = None  # any broker serves controller-bound requests; this one is up
        if holder is not None and holder in listed:
            return holder
        me = self._broker.config.broker_id
        if me in listed:
            return me
        return min(listed, default=NO_CONTROLLER)
