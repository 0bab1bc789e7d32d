"""This broker's membership: its registration (a new incarnation each time it joins) and the
lease its heartbeats renew, counted by its own clock (Kafka's BrokerLifecycleManager).

The lease decides whether this broker may act as a leader at all: a paused or partitioned
broker whose lease lapsed may have been replaced, so until it has renewed it (and, after a
lapse, read the metadata it missed) `ok()` is False and it neither serves nor writes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from cluster.clock import Clock
from ingest.broker_config import BrokerConfig, kafka_advertised
from metadata.brokers import BrokerRepo
from metadata.types import BrokerRegistration

log = logging.getLogger("tierlog.broker")


class BrokerLease:
    def __init__(
        self,
        config: BrokerConfig,
        brokers: BrokerRepo,
        clock: Clock,
        refresh_metadata: Callable[[], Awaitable[None]],
        serving: Callable[[], bool],
    ) -> None:
        self._config, self._brokers, self._clock = config, brokers, clock
        self._refresh_metadata, self._serving = refresh_metadata, serving
        self.until = 0.0  # monotonic deadline of the lease, by our own clock
        self.last_heartbeat = 0.0  # monotonic start of the last successful heartbeat
        self.rejoined = False  # registered again after a lapse; metadata not yet re-read
        self.left = False  # deregistered on shutdown: no more heartbeats nor controller ticks

    def ok(self) -> bool:
        return self._clock.monotonic() < self.until

    async def register(self) -> None:
        """Join as a new incarnation, even while the last one's lease still runs: a restart
        within the lease (a supervisor brings a killed broker back in a second or two) must
        look like one to the controller, which then moves its leaderships and takes it back
        into ISRs only once it has caught up (Kafka's new broker epoch on registration)."""
        started = self._clock.monotonic()
        await asyncio.to_thread(self.register_row)
        self._renewed(started)

    def register_row(self) -> BrokerRegistration:
        """The registry row, whole: a re-registration after a lapsed lease must carry the
        Kafka address too, or the other brokers' Metadata answers name a wrong port for this
        broker and Kafka clients cannot reach what it leads (chaos, seed 3255133382)."""
        cfg = self._config
        kafka = kafka_advertised(cfg)  # other brokers name it in their Kafka Metadata answers
        return self._brokers.register(
            cfg.broker_id,
            cfg.advertised_url,
            cfg.lease_ms,
            kafka_address=None if kafka is None else f"{kafka[0]}:{kafka[1]}",
        )

    async def heartbeat(self) -> None:
        if self.left:
            return
        cfg = self._config
        started = self._clock.monotonic()
        alive = await asyncio.to_thread(self._brokers.heartbeat, cfg.broker_id, cfg.lease_ms)
        if not alive:
            # Our lease lapsed (we were paused or cut off): others may have taken over.
            info = await asyncio.to_thread(self.register_row)
            if self._serving():
                log.warning(
                    "broker lease lapsed: registered again",
                    extra={
                        "broker_id": cfg.broker_id,
                        "incarnation": info.incarnation,
                        "since_last_heartbeat_s": round(started - self.last_heartbeat, 3),
                    },
                )
            self.rejoined = True
        if self.rejoined:
            # While it lapsed the controller may have moved its leaderships: until this
            # broker has read what it missed, its lease must not count as live, or it would
            # serve and take writes as a leader that was replaced (stale reads, 416s).
            await self._refresh_metadata()
            self.rejoined = False
        self._renewed(started)

    def _renewed(self, started: float) -> None:
        # Count the lease from before the call, with a margin, so we never overestimate it.
        self.last_heartbeat = started
        self.until = started + self._config.lease_ms * 0.8 / 1000
