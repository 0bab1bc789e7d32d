"""The broker process: membership, metadata, hosted partitions, duties, the HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from cluster.authorizer import Authorizer
from cluster.dependency_wait import wait_for
from cluster.duty import Backoff, Duty
from cluster.http.inflight import SlotCounter
from cluster.http.quota_manager import QuotaManager
from cluster.metadata_cache import MetadataCache
from cluster.metadata_follower import MetadataFollower
from cluster.read_contract import ColdReader
from cluster.search_contract import ColdSearcher
from ingest.broker_config import BrokerConfig
from ingest.broker_deps import BrokerDeps, broker_notices
from ingest.broker_lease import BrokerLease
from ingest.cleaner.erasure_duty import ErasureDuty
from ingest.cleaner.log_cleaner import CleanerDuty
from ingest.log.log_manager import LogManager
from ingest.loop_lag import watch_loop_lag
from ingest.metrics import ReplicationMetrics
from ingest.replication.controller import Controller
from ingest.replication.controller_runner import ControllerRunner
from ingest.replication.death_signal import DeathSignal
from ingest.replication.forwarding import Forwarder
from ingest.replication.handover import RESIGN_S, hand_over_leaderships
from ingest.replication.partition import Partition, Role
from ingest.replication.preferred_leader import PreferredLeaderMover
from ingest.replication.replica_leader import ReplicaFetchHandler
from ingest.replication.replica_manager import ReplicaManager
from ingest.schema_ids import SchemaIdCheck
from ingest.tiered.local_retention import LocalRetention
from ingest.tiered.manifest_views import ManifestViews
from ingest.tiered.segment_registrar import SealedSegmentRegistrar
from ingest.tiered.tier_status import TierStatusReader
from ingest.tiered.tiering_gauges import TieringGauges
from ingest.tiered.untiered_bound import UntieredBound
from logformat.errors import ErrorCode, TierlogError
from logformat.partitioner import StickyPartitioner
from metadata.brokers import BrokerRepo
from metadata.cold_manifest import COLD_FILES_CHANNEL, ColdManifest
from metadata.controller_lease import ControllerLease
from metadata.db import migrate
from metadata.db_errors import POSTGRES_DOWN
from metadata.erasures import ErasureRepo
from metadata.partition_state import PartitionStateRepo
from metadata.quotas import QuotaRepo
from metadata.registry_store import RegistryStore
from metadata.segment_registry import SegmentRegistry
from metadata.topics import TopicRepo
from metadata.types import TopicNamePartition

log = logging.getLogger("tierlog.broker")


class Broker:
    def __init__(
        self, config: BrokerConfig, deps: BrokerDeps, cold_reader: ColdReader | None = None
    ) -> None:
        """Nothing here touches Postgres or the disk (start() does): `deps` holds what the
        composition root built, the engine, the clock and the node's metrics registry."""
        self.config = config
        self.deps, self.clock = deps, deps.clock
        self.registry = deps.registry  # this node's metrics (served by /metrics)
        self.metrics = ReplicationMetrics(deps.registry)
        # Serves fetches below the local log start from S3; None: hot reads only (no S3).
        self.cold_reader = cold_reader
        # Searches the cold tier (GET /topics/{topic}/search): fetch's reader does both.
        self.cold_searcher = cold_reader if isinstance(cold_reader, ColdSearcher) else None
        self.engine = deps.engine
        self.brokers = BrokerRepo(self.engine)
        self.topics = TopicRepo(self.engine, dict(config.topic_defaults))
        self.partition_repo = PartitionStateRepo(self.engine)
        self.cache = MetadataCache(self.topics, self.brokers)
        # One LISTEN connection for every channel this broker follows, as its named session.
        self.notices = deps.notices or broker_notices(config)
        # Every refresh (NOTIFY, interval, on demand) reconciles the hosted replicas.
        self.metadata = MetadataFollower(
            self.cache, self.notices, config.metadata_refresh_ms, on_refresh=self._refreshed
        )
        self.replicas: ReplicaManager | None = None
        # Tiering, the broker's share (Kafka's RemoteLogManager tasks): one duty each.
        manifest = ColdManifest(self.engine)
        self.registrar = SealedSegmentRegistrar(
            lambda: self.partitions, self.cache, SegmentRegistry(self.engine)
        )
        # Produce waits (503) while this broker holds too much the cold tier lacks.
        self.untiered_bound = UntieredBound(config.max_untiered_bytes, config.tiering_duty_ms)
        # Each hosted tiered partition's manifest view, read again when a NOTIFY names it.
        self.manifest_views = ManifestViews(manifest, self.clock.monotonic)
        self._cold_files = self.notices.subscribe(
            COLD_FILES_CHANNEL, self.manifest_views.changed_all, self.manifest_views.changed
        )
        self.retention = LocalRetention(
            lambda: self.partitions,
            self.cache,
            self.manifest_views,
            TieringGauges(self.untiered_bound),
        )
        self.tier_status = TierStatusReader(manifest)
        self.cleaner = CleanerDuty(lambda: self.partitions, self.cache, manifest)
        self.erasures = ErasureDuty(
            config.broker_id,
            lambda: self.partitions,
            self.cache,
            ErasureRepo(self.engine),
            self.clock.monotonic,
        )
        self.fetch_handler = ReplicaFetchHandler(lambda: self.partitions, self._expand_isr)
        self.preferred = PreferredLeaderMover(
            config.broker_id,
            lambda: self.partitions,
            PartitionStateRepo(self.engine),
            self.metadata.refresh_now,
            clock=self.clock,
        )
        self.controller = Controller(
            self.engine, config.broker_id, config.lease_ms, metrics=self.metrics, clock=self.clock
        )
        self.controller_lease = ControllerLease(self.engine)
        self.controller_runner = ControllerRunner(
            self.controller,
            lambda: self.cache.version,
            lambda: self.lease_ok() and not self.lease.left,
        )
        # A leader's dropped connections, re-checked at once: failover inside the lease.
        self.death_signal = DeathSignal(
            config.broker_id,
            self.brokers,
            self.controller,
            self.notices,
            self.controller_runner.tick,
            lambda: self.cluster_secret,
            link=deps.peer_link,
        )
        self.sticky: dict[str, StickyPartitioner] = {}
        self.cluster_secret = ""
        self.cluster_id = ""  # read at start: Metadata names it even while Postgres is away
        self.forwarder = Forwarder(
            lambda: self.cluster_secret, config.request_timeout_ms / 1000, link=deps.peer_link
        )
        self.authorizer = Authorizer(
            self.engine, self.notices, config.auth, lambda: self.cluster_secret
        )
        # Client quotas and the long-poll cap, one of each for both listeners (HTTP, Kafka).
        self.quotas = QuotaManager(QuotaRepo(self.engine).load)
        self.long_polls = SlotCounter(config.max_long_polls)
        # Broker-side schema validation of produced records, for both listeners.
        self.schema_ids = SchemaIdCheck(RegistryStore(self.engine))
        self._background: set[asyncio.Future[Any]] = set()
        self.ready = False
        self.lease = BrokerLease(
            config, self.brokers, self.clock, self.metadata.refresh_now, lambda: self.ready
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._resigning: asyncio.Future[None] | None = None  # controlled shutdown's hand-over
        self._tasks: list[asyncio.Task[None]] = []
        self._logs: LogManager | None = None
        self._stopping = False
        # SIGTERM received: the server stops serving follower fetches before stop() runs, and
        # a leader shrinking its ISR meanwhile left partitions with no in-sync replica to
        # elect when it deregistered (offline until it came back: a rolling restart stalled).
        self.draining = False

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        # Postgres may be restarting or frozen as we start: wait for it (bounded) rather than die.
        await asyncio.to_thread(
            wait_for, "Postgres", lambda: migrate(self.engine), retry_on=POSTGRES_DOWN
        )
        self.cluster_secret = await asyncio.to_thread(self.partition_repo.cluster_secret)
        self.cluster_id = await asyncio.to_thread(self.partition_repo.cluster_id)
        await self.authorizer.start()
        await self.lease.register()
        # Renew the lease from now on: the rest of start-up (log recovery, the cold reader's
        # S3 clients) can outlast a lease, and a lapse makes the controller see a restart.
        self._tasks = [
            self._every(cfg.heartbeat_ms, self.lease.heartbeat, "heartbeat", backs_off=False)
        ]
        self._tasks.append(asyncio.create_task(watch_loop_lag(), name="loop-lag"))
        if self.cold_reader is not None:
            await self.cold_reader.start()
        self._logs = await asyncio.to_thread(LogManager, str(cfg.data_dir))
        self.replicas = ReplicaManager(
            cfg.broker_id,
            self._logs,
            self.cache,
            self.partition_repo,
            self.lease_ok,
            self.fetch_handler.notify_append,
            lambda: self.cluster_secret,
            self.metadata.refresh_now,
            metrics=self.metrics,
            clock=self.clock,
            link=self.deps.peer_link,
            on_dropped=self.death_signal.connection_dropped,
        )
        await self.metadata.load()
        self.metadata.start()
        self._cold_files.start()
        self.death_signal.start()
        run = self.controller_runner
        look = self._duty(cfg.controller_tick_ms, run.tick_if_due, "controller", backs_off=False)
        self._tasks += [
            run.run(look),
            self._every(max(100, cfg.replica_lag_ms // 4), self._shrink_isr, "isr-shrink"),
            self._every(1000, self._roll, "segment-roll"),
            self._every(5000, self._checkpoint, "hw-checkpoint"),
            self._every(cfg.tiering_duty_ms, self.registrar.run_once, "register-sealed"),
            self._every(cfg.tiering_duty_ms, self.retention.run_once, "local-retention"),
            self._every(cfg.cleaner_interval_ms, self._clean_logs, "log-cleaner"),
            self._every(1000, self._erase_keys, "key-erasure"),
            self._every(1000, self._heal_offline, "offline-logs"),
            self._every(500, self._move_to_preferred, "preferred-leader"),
        ]
        self.ready = True
        log.info(
            "broker started",
            extra={
                "broker_id": cfg.broker_id,
                "url": cfg.advertised_url,
                "partitions": len(self.partitions),
            },
        )

    async def stop(self) -> None:
        if self._resigning is not None:  # the hand-over begun on SIGTERM ends first
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._resigning), RESIGN_S + 10)
        self.ready = False
        self._stopping = True
        await self.metadata.stop()
        self._cold_files.stop()
        self.authorizer.stop()
        await self.controller_runner.stop()
        for task in self._tasks:
            task.cancel()
        # Bounded: on 3.11 a cancel racing a completed wait can be swallowed; the loops also
        # watch _stopping, so they end on their next turn either way.
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=5)
            if pending:
                log.warning(
                    "duties still running at shutdown",
                    extra={"tasks": sorted(t.get_name() for t in pending)},
                )
        if self.replicas is not None:
            await self.replicas.close()
        if self._logs is not None:
            self._logs.close()
        await self.forwarder.close()
        if self.cold_reader is not None:
            with contextlib.suppress(Exception):
                await self.cold_reader.close()
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self.controller.resign)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self.brokers.deregister, self.config.broker_id)
        # Last: its session tells the others this process lives until its lease has ended.
        await self.death_signal.stop()
        self.engine.dispose()
        log.info("broker stopped", extra={"broker_id": self.config.broker_id})

    def _every(
        self,
        interval_ms: int,
        duty: Callable[[], Awaitable[None]],
        name: str,
        *,
        backs_off: bool = True,
    ) -> asyncio.Task[None]:
        return self._duty(interval_ms, duty, name, backs_off=backs_off).start()

    def _duty(
        self, interval_ms: int, duty: Callable[[], Awaitable[None]], name: str, *, backs_off: bool
    ) -> Duty:
        """A broker-wide duty (cluster/duty.py): an outage backs it off (not the lease's
        heartbeat or the controller: they must act as soon as Postgres is back), a bug is
        logged with its traceback and counted."""
        period_s = interval_ms / 1000
        return Duty(
            name,
            duty,
            period_s,
            context={"broker_id": self.config.broker_id},
            backoff=Backoff() if backs_off else Backoff(max_s=period_s),
            stopped=lambda: self._stopping,
        )

    # -- membership and lease ---------------------------------------------------------------

    def lease_ok(self) -> bool:
        return self.lease.ok()

    def _refreshed(self) -> None:
        self.reconcile()
        self.controller_runner.refreshed()  # a new version wakes the controller duty

    # -- duties -----------------------------------------------------------------------------

    def _expand_isr(self, state: Partition, new_isr: list[int]) -> None:
        if self.replicas is not None:
            self.replicas.request_isr_change(state, new_isr)

    def begin_drain(self) -> None:
        """Shutdown has begun (called from the signal handler): stop shrinking ISRs, and hand
        the partitions this broker leads to other in-sync replicas now, while the server
        drains, rather than leave them leaderless until stop() ends the lease."""
        if self.draining:
            return
        self.draining = True
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._start_resigning)

    def _start_resigning(self) -> None:
        self._resigning = asyncio.ensure_future(self._resign_leaderships())

    async def _resign_leaderships(self) -> None:
        await hand_over_leaderships(self.partition_repo, self.config.broker_id, self.partitions)
        # Then leave: the controller takes it out of every ISR (leaders stop waiting for its
        # fetches) and keeps it out, as Kafka's controller does with a broker shutting down.
        self.lease.left = True
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self.controller.resign)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self.brokers.deregister, self.config.broker_id)
        with contextlib.suppress(Exception):
            await self.metadata.refresh_now()

    async def _shrink_isr(self) -> None:
        if self.replicas is not None and self.lease_ok() and not self.draining:
            self.replicas.shrink_lagging(self.config.replica_lag_ms)

    async def _move_to_preferred(self) -> None:
        if self.lease_ok():
            await self.preferred.run_once()

    async def _heal_offline(self) -> None:
        if self.replicas is not None and self.lease_ok():
            await self.replicas.heal_offline()

    async def _clean_logs(self) -> None:
        await asyncio.to_thread(self.cleaner.run_once)

    async def _erase_keys(self) -> None:
        if self.lease_ok():
            await asyncio.to_thread(self.erasures.run_once)

    async def _roll(self) -> None:
        if self._logs is not None:
            self._logs.roll_due(int(self.clock.time() * 1000))

    async def _checkpoint(self) -> None:
        if self.replicas is not None:
            self.replicas.checkpoint()

    # -- lookups for the API ----------------------------------------------------------------

    @property
    def partitions(self) -> dict[TopicNamePartition, Partition]:
        return self.replicas.partitions if self.replicas is not None else {}

    def reconcile(self) -> None:
        if self.replicas is not None:
            self.replicas.reconcile()

    def leader_state(self, topic: str, partition: int) -> Partition | None:
        """The local state if this broker leads the partition now, else None. Not while its
        lease is not provably live: a paused or partitioned leader may have been replaced,
        and must neither serve reads (its log may be behind the new leader's) nor writes."""
        state = self.partitions.get(TopicNamePartition(topic, partition))
        if state is None or state.role is not Role.LEADER or not self.lease_ok():
            return None
        return state

    def require_leader(self, topic: str, partition: int, *, write: bool = False) -> Partition:
        """The local state of a partition this broker must lead (a request that is never
        forwarded: internal calls, the Kafka listener), else NOT_LEADER_OR_FOLLOWER. A write
        to a partition it still leads by its metadata while its lease is in doubt gets the
        leader's own refusal instead (Partition.ensure_leader: retriable, same epoch)."""
        state = self.leader_state(topic, partition)
        if state is None:
            led = self.partitions.get(TopicNamePartition(topic, partition))
            if write and led is not None and led.role is Role.LEADER:
                led.ensure_leader()
            lapsed = "; its cluster lease lapsed" if not self.lease_ok() else ""
            raise TierlogError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.config.broker_id} does not lead {topic}-{partition}{lapsed}",
            )
        return state

    def background(self, future: asyncio.Future[Any]) -> None:
        """Keep a fire-and-forget future referenced until it finishes (acks=0 writes)."""
        self._background.add(future)
        future.add_done_callback(self._background.discard)

    def sticky_for(self, topic: str) -> StickyPartitioner:
        sticky = self.sticky.get(topic)
        if sticky is None:
            sticky = self.sticky[topic] = StickyPartitioner()
        return sticky
