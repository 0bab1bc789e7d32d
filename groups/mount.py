"""Consumer groups on a node: the routes, their own Postgres pool and threads, the sweep.

Groups get their own engine and thread pool: group transactions wait on group row locks, and
those waits must never hold the connections or threads a broker needs for its lease
heartbeat or metadata refreshes.

``GroupsMount(database_url, cache, token, local_hw)``: mount ``.routes`` and run ``.running()``
for the node's lifetime; ``.kafka`` serves a Kafka listener's classic group protocol. The
composition root (tierlog/cli/extensions.py) does so on brokers and fetch nodes alike.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor

from cluster.metadata_cache import MetadataCache
from groups.assignors import DEFAULT_ASSIGNOR
from groups.classic import KafkaClassicGroups
from groups.coordinator import GroupCoordinator
from groups.deps import blocking
from groups.lookups import ClusterOffsets, LocalHighWatermark
from groups.routes import group_routes
from groups.sweeper import sweep_forever
from metadata.db import make_engine
from metadata.groups import GroupRepo

SWEEP_EVERY_S = 1.0
THREADS = 8


class GroupsMount:
    def __init__(
        self,
        database_url: str,
        cache: MetadataCache,
        token: Callable[[], str],
        local_hw: LocalHighWatermark | None = None,
        sweep_every_s: float = SWEEP_EVERY_S,
    ) -> None:
        self.engine = make_engine(database_url, pool_size=THREADS, max_overflow=0)
        self.executor = ThreadPoolExecutor(THREADS, thread_name_prefix="tierlog-groups")
        self.lookups = ClusterOffsets(cache, token, local_hw)
        self.routes = group_routes(
            self.engine,
            self.lookups.high_watermarks,
            self.lookups.resolve,
            self.executor,
            record_timestamp=self.lookups.record_timestamp,
        )
        # Kafka's classic group protocol, for a broker's Kafka listener (cluster/kafka_groups.py).
        self.kafka = KafkaClassicGroups(
            GroupCoordinator(GroupRepo(self.engine), DEFAULT_ASSIGNOR), blocking(self.executor)
        )
        self._sweep_every_s = sweep_every_s

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        coordinator = GroupCoordinator(GroupRepo(self.engine), DEFAULT_ASSIGNOR)
        sweeper = asyncio.create_task(
            sweep_forever(coordinator, blocking(self.executor), self._sweep_every_s),
            name="group-expiry-sweep",
        )
        try:
            yield
        finally:
            sweeper.cancel()
            await asyncio.wait([sweeper], timeout=5)
            await self.lookups.close()
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.engine.dispose()
