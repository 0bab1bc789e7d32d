"""`tierlog fetch`: a node with no partitions that serves consumers (docs/design.md §2 "fetch").

Cold reads (offsets in the committed cold range) it serves itself, straight from S3, so
replaying history loads neither the brokers' disks nor their event loops; hot reads it hands
to a replica (an in-sync follower first, see replicas.py). It knows the cluster from Postgres
the way a broker does: the metadata cache, refreshed on NOTIFY, and the cluster secret for
internal calls. Other packages add routes and duties to it (`extensions`: consumer groups).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import NamedTuple

from cluster.authorizer import Authorizer, AuthSettings
from cluster.http.admission import ConcurrencyLimits
from cluster.http.guard import HttpLimits
from cluster.metadata_cache import MetadataCache
from cluster.metadata_follower import MetadataFollower
from cluster.notify_hub import NotifyHub
from cluster.read_contract import ColdReader
from fetch.replicas import ReplicaRouter
from fetch.typed_answers import HotTyping
from metadata.brokers import BrokerRepo
from metadata.db import make_engine, migrate
from metadata.partition_state import PartitionStateRepo
from metadata.topics import TopicRepo

log = logging.getLogger("tierlog.fetch.node")


class FetchNodeConfig(NamedTuple):
    host: str
    port: int
    database_url: str
    request_timeout_ms: int = 30_000
    metadata_refresh_ms: int = 1000  # a fallback: NOTIFY normally wakes refreshes at once
    auth: AuthSettings = AuthSettings()  # API keys + ACLs unless explicitly turned off
    tls_cert: str | None = None  # PEM files: the listener speaks HTTPS when both are set
    tls_key: str | None = None
    http_limits: HttpLimits = HttpLimits()  # header size/count/deadline, connection caps
    concurrency: ConcurrencyLimits = ConcurrencyLimits()  # searches at once


class FetchNode:
    def __init__(
        self, config: FetchNodeConfig, cold: ColdReader | None, notices: NotifyHub | None = None
    ) -> None:
        """`notices`: the node's LISTEN connection, shared with its cold reader (None: its
        own)."""
        self.config = config
        self.notices = notices or NotifyHub(config.database_url)
        self.cold = cold  # None: no S3 configured, every read goes to a replica
        self.engine = make_engine(config.database_url)
        self.cache = MetadataCache(TopicRepo(self.engine), BrokerRepo(self.engine))
        # force: it routes by broker liveness, which leases change without a version bump.
        self.metadata = MetadataFollower(
            self.cache, self.notices, config.metadata_refresh_ms, force=True
        )
        self.cluster_secret = ""
        self.router = ReplicaRouter(
            self.cache, lambda: self.cluster_secret, config.request_timeout_ms / 1000
        )
        self.typing = HotTyping(self.engine)  # typed columns of hot answers (?columns=)
        self.authorizer = Authorizer(
            self.engine, self.notices, config.auth, lambda: self.cluster_secret
        )
        self.ready = False

    async def start(self) -> None:
        await asyncio.to_thread(migrate, self.engine)
        self.cluster_secret = await asyncio.to_thread(
            PartitionStateRepo(self.engine).cluster_secret
        )
        await self.authorizer.start()
        await self.metadata.load()
        if self.cold is not None:
            await self.cold.start()
        self.metadata.start()
        self.ready = True
        log.info("fetch node started", extra={"cold_reads": self.cold is not None})

    async def stop(self) -> None:
        self.ready = False
        await self.metadata.stop()
        self.authorizer.stop()
        await self.router.close()
        if self.cold is not None:
            with contextlib.suppress(Exception):
                await self.cold.close()
        self.engine.dispose()
