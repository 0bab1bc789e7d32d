"""The partitions this broker hosts, their roles, the fetchers that follow remote leaders,
the leader's ISR changes (compare-and-set on the partition epoch in Postgres), and logs that
went offline (Kafka's offline log dir, per partition): a leader whose log failed hands the
partition to another in-sync replica and leaves the ISR; the log is reopened (recovery
repairs it) once the storage works again, and catches up as a follower. A corrupt frame is
put back in place from a peer's whole copy (frame_repair.py); a leader that finds none
hands the partition off as for a failed log."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import httpx

from cluster.clock import SYSTEM_CLOCK, Clock
from cluster.internal_http import PeerLink, internal_async_client, internal_transport
from cluster.metadata_cache import MetadataCache, TopicView
from failures.logged import log_failure
from ingest.log import storage_errors
from ingest.log.local_log import LocalLog, LogConfig
from ingest.log.log_manager import LogManager
from ingest.metrics import ReplicationMetrics
from ingest.replication import corruption, frame_repair
from ingest.replication.handover import hand_over, handed_over
from ingest.replication.partition import Partition, Role
from ingest.replication.replica_fetcher import ReplicaFetcher
from metadata.partition_state import PartitionStateRepo
from metadata.types import PartitionRecord, TopicNamePartition

log = logging.getLogger("tierlog.replica_manager")


def _count_isr_change(metrics: ReplicationMetrics, old: list[int], new: list[int]) -> None:
    """Kafka's IsrShrinksPerSec / IsrExpandsPerSec, as counters."""
    if set(old) - set(new):
        metrics.isr_shrinks.inc()
    if set(new) - set(old):
        metrics.isr_expands.inc()


# A frame is one small request: a peer that does not answer soon is skipped this time.
FRAME_TIMEOUT = httpx.Timeout(5.0, connect=2.0)
ISR_READ_BACK_S = 0.5  # between reads of a partition's row after a failed ISR change


def log_config(view: TopicView) -> LogConfig:
    return LogConfig(segment_bytes=view.config.segment_bytes, segment_ms=view.config.segment_ms)


class ReplicaManager:
    def __init__(
        self,
        me: int,
        logs: LogManager,
        cache: MetadataCache,
        repo: PartitionStateRepo,
        lease_ok: Callable[[], bool],
        on_append: Callable[[], None],
        token: Callable[[], str],
        refresh_metadata: Callable[[], Awaitable[None]],
        *,
        metrics: ReplicationMetrics,
        clock: Clock = SYSTEM_CLOCK,
        link: PeerLink = internal_transport,
        on_dropped: Callable[[int], None] = lambda leader_id: None,
    ) -> None:
        self.me, self.logs, self.cache, self.repo = me, logs, cache, repo
        self._on_dropped = on_dropped  # a leader's connection dropped (death_signal.py)
        # The node's metrics and clock, and how its fetchers reach leaders (HTTP; in-process
        # routes in tests/harness/), all passed in by the broker.
        self.metrics, self.clock, self._link = metrics, clock, link
        self._lease_ok, self._on_append = lease_ok, on_append
        self._token, self._refresh_metadata = token, refresh_metadata
        self.partitions: dict[TopicNamePartition, Partition] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._frames: httpx.AsyncClient | None = None  # asks peers for frames (frame_repair)
        # Failed logs: when to try reopening next, and the wait after that (doubling while
        # the storage keeps failing, so a flapping disk is not reopened every second).
        self._retry: dict[TopicNamePartition, tuple[float, float]] = {}
        # Read at scrape time: the gauge can never lag what /readyz says.
        metrics.offline_replicas.set_function(lambda: len(self.offline()))
        metrics.under_replicated.set_function(self._under_replicated)
        metrics.under_min_isr.set_function(self._under_min_isr)

    # -- metadata → hosted partitions -------------------------------------------------------

    def reconcile(self) -> None:
        """Host exactly the replicas metadata gives this broker, in the roles it names."""
        wanted: dict[TopicNamePartition, tuple[TopicView, PartitionRecord]] = {}
        for view in self.cache.topics():
            for p in view.partitions:
                if self.me in p.replicas:
                    wanted[TopicNamePartition(view.info.name, p.partition)] = (view, p)
        for key in list(self.partitions):
            entry = wanted.get(key)
            if entry is None or entry[0].info.id != self.partitions[key].topic_id:
                self._drop(key)
        known_ids = {v.info.id for v in self.cache.topics()}
        for topic, topic_id, partition in self.logs.existing():
            if topic_id not in known_ids and (topic, partition) not in self.partitions:
                self.logs.drop(topic, partition)
                log.info(
                    "stray log of a deleted topic removed",
                    extra={"topic": topic, "partition": partition, "topic_id": topic_id},
                )
        for key, (view, info) in wanted.items():
            state = self.partitions.get(key)
            if state is None:
                plog = self.logs.get_or_create(key[0], view.info.id, key[1], log_config(view))
                state = self.partitions[key] = self._partition(plog)
            else:
                state.log.update_config(log_config(view))
            state.apply(info)
        self._sync_fetchers()
        led = sum(s.role is Role.LEADER for s in self.partitions.values())
        self.metrics.partitions_led.set(led)

    def _partition(self, plog: LocalLog) -> Partition:
        return Partition(
            plog,
            self.me,
            self._lease_ok,
            self._on_append,
            metrics=self.metrics,
            clock=self.clock,
        )

    def _drop(self, key: TopicNamePartition) -> None:
        state = self.partitions.pop(key)
        state.close()
        for fetcher in self.fetchers.values():
            fetcher.partitions.pop(key, None)
        self.logs.drop(*key)
        log.info("partition removed", extra={"topic": key[0], "partition": key[1]})

    def _sync_fetchers(self) -> None:
        by_leader: dict[int, dict[TopicNamePartition, Partition]] = {}
        for key, state in self.partitions.items():
            if state.role is Role.FOLLOWER and state.leader_id is not None:
                by_leader.setdefault(state.leader_id, {})[key] = state
        for leader_id, parts in by_leader.items():
            fetcher = self.fetchers.get(leader_id)
            if fetcher is not None and not fetcher.alive:  # ended by a bug: never left so
                log.error(
                    "replica fetcher had stopped; starting it again", extra={"leader": leader_id}
                )
                asyncio.get_running_loop().create_task(fetcher.stop())
                fetcher = None
            if fetcher is None:
                fetcher = self.fetchers[leader_id] = ReplicaFetcher(
                    self.me,
                    leader_id,
                    functools.partial(self.cache.broker_url, leader_id),
                    self._token,
                    self._refresh_metadata,
                    self._link,
                    self._on_dropped,
                )
                fetcher.start()
            fetcher.partitions = parts
        for leader_id in [lid for lid in self.fetchers if lid not in by_leader]:
            fetcher = self.fetchers.pop(leader_id)
            asyncio.get_running_loop().create_task(fetcher.stop())

    # -- leader: ISR changes ----------------------------------------------------------------

    def request_isr_change(self, state: Partition, new_isr: list[int]) -> None:
        """Compare-and-set the ISR in Postgres off the event loop; one change at a time."""
        if state.isr_change_pending or state.role is not Role.LEADER:
            return
        state.begin_isr_change(new_isr)
        asyncio.get_running_loop().create_task(self._alter_isr(state, new_isr))

    async def _alter_isr(self, state: Partition, new_isr: list[int]) -> None:
        try:
            info = await asyncio.to_thread(
                self.repo.alter_isr,
                state.tp,
                self.me,
                state.leader_epoch,
                state.partition_epoch,
                new_isr,
            )
            if info is None:  # lost a race with the controller or a newer leader
                await self._refresh_metadata()
            else:
                _count_isr_change(self.metrics, state.isr, info.isr)
                log.info(
                    "ISR changed",
                    extra={
                        "topic": state.topic,
                        "partition": state.partition,
                        "from": state.isr,
                        "to": info.isr,
                    },
                )
                state.set_isr(info)
        except Exception:
            log.exception(
                "ISR change failed", extra={"topic": state.topic, "partition": state.partition}
            )
            # Its answer was lost, not necessarily the change (a connection cut after the
            # commit): the ISR in Postgres is unknown, so the maximal ISR holds the high
            # watermark until it is read back (Kafka keeps its pending ISR state likewise).
            await self._read_back_isr(state)
        state.end_isr_change()

    async def _read_back_isr(self, state: Partition) -> None:
        """Adopt the partition's row from Postgres, retrying while it cannot be read and this
        broker still leads it. Until then the ISR change stays pending."""
        while state.role is Role.LEADER and not state.closed:
            try:
                info = await asyncio.to_thread(self.repo.get, state.tp)
            except Exception as exc:
                log.warning(
                    "ISR unknown after a failed change; reading it again",
                    extra={"topic": state.topic, "partition": state.partition, "error": repr(exc)},
                )
                await asyncio.sleep(ISR_READ_BACK_S)
                continue
            if info is not None:
                state.apply(info)
            return

    def _led(self) -> list[Partition]:
        return [s for s in list(self.partitions.values()) if s.role is Role.LEADER]

    def _under_replicated(self) -> int:
        """Kafka's UnderReplicatedPartitions: led partitions missing a replica in the ISR."""
        return sum(len(s.isr) < len(s.replicas) for s in self._led())

    def _under_min_isr(self) -> int:
        """Kafka's UnderMinIsrPartitionCount: led partitions refusing acks=all writes."""
        count = 0
        for s in self._led():
            view = self.cache.topic(s.topic)
            count += view is not None and len(s.isr) < view.config.min_insync_replicas
        return count

    def shrink_lagging(self, lag_ms: int) -> None:
        for state in self.partitions.values():
            if state.role is Role.LEADER:
                new_isr = state.isr_shrink(lag_ms)
                if new_isr is not None:
                    self.request_isr_change(state, new_isr)

    # -- storage failures ---------------------------------------------------------------------

    async def heal_offline(self) -> None:
        """Put corrupt frames back from peers; hand off what this broker cannot serve;
        reopen logs that failed."""
        for state in frame_repair.wanted(list(self.partitions.values())):
            await self._repair_frame(state)
        index_ok = await self._heal_index()
        for key, state in list(self.partitions.items()):
            failed = state.log.failure is not None
            if state.role is Role.LEADER and (failed or state.handoff_wanted):
                await self._hand_off(state)
            if failed and index_ok and self.partitions.get(key) is state:
                await self._reopen(key, state)
        now = self.clock.monotonic()
        for key in [k for k, (at, wait) in self._retry.items() if now - at > 10 * wait]:
            del self._retry[key]  # online long enough: the next failure starts over at 1 s
        reasons = Counter(storage_errors.reason(why) for why in self._failures().values())
        for why in storage_errors.REASONS:
            self.metrics.offline_by_reason.labels(why).set(reasons[why])

    def _failures(self) -> dict[str, Exception]:
        """Each offline log (`topic-partition`) and the failure that took it offline."""
        return {
            f"{s.topic}-{s.partition}": s.log.failure
            for s in self.partitions.values()
            if s.log.failure is not None
        }

    def offline(self) -> list[str]:
        return list(self._failures())

    def offline_reasons(self) -> dict[str, str]:
        """Each offline log and why, in words (/readyz)."""
        return {tp: storage_errors.describe(exc) for tp, exc in self._failures().items()}

    async def _heal_index(self) -> bool:
        """Whether the broker's index takes writes; after a failed write (RocksDB then takes
        none, on any partition) it is reopened once its disk has room again."""
        index = self.logs.index
        if index.failure is None:
            return True
        if not await asyncio.to_thread(storage_errors.has_room, index.path):
            return False
        try:
            await asyncio.to_thread(index.reopen)
        except Exception as exc:  # still failing, or a reader holds it: try again next tick
            log.debug("index not reopened yet", extra={"error": str(exc)})
            return False
        return True

    async def _repair_frame(self, state: Partition) -> None:
        """Put back `state`'s corrupt frame from the first peer holding it whole."""
        at = state.repair_from
        if at is None:
            return
        if self._frames is None:
            self._frames = internal_async_client(self._token, FRAME_TIMEOUT, self._link)
        try:
            outcome, peer = await frame_repair.repair(
                state, at, self.cache.broker_url, self._frames
            )
        except Exception:  # the log went offline meanwhile, or a bug: the next tick tries again
            log.exception(
                "putting back a corrupt frame failed",
                extra={"topic": state.topic, "partition": state.partition, "offset": at},
            )
            return
        if outcome is frame_repair.Outcome.REFETCH:
            state.refetch_wanted = True
        if outcome is not frame_repair.Outcome.REPAIRED or peer is None:
            return
        frame_repair.repaired_log(state, at, peer)
        state.lost_frames.discard(at)
        if state.repair_from == at:  # no lower bad frame was found meanwhile
            state.repair_from = None
            state.handoff_wanted = state.refetch_wanted = False

    async def _hand_off(self, state: Partition) -> None:
        info = await hand_over(self.repo, self.me, state)
        if info is None:  # no live in-sync replica to take over (or a race): keep trying
            if state.log.failure is None:
                corruption.no_taker(state)  # is its corrupt frame the only in-sync copy?
            return
        state.handoff_wanted = False
        log.warning(
            "leadership handed off: this broker cannot serve the partition",
            extra={
                **handed_over(state, info),
                "isr": info.isr,
                "why": str(state.log.failure or "a corrupt frame on this broker's copy"),
            },
        )
        await self._refresh_metadata()

    async def _reopen(self, key: TopicNamePartition, state: Partition) -> None:
        at, wait = self._retry.get(key, (0.0, 1.0))
        now = self.clock.monotonic()
        if now < at:
            return
        if not await asyncio.to_thread(storage_errors.has_room, state.log.dir):
            # A full disk: reopening would succeed and fail again at the first append. Not an
            # attempt, so the log comes back within a second of space being freed.
            return
        self._retry[key] = (now + wait, min(60.0, wait * 2))
        try:
            fresh = await asyncio.to_thread(self.logs.reopen, state.log)
        except Exception as exc:  # the storage still fails: stay offline, try again later
            log.debug(
                "failed log not reopened yet", extra={"log": state.log.dir, "error": str(exc)}
            )
            return
        state.close()
        new = self.partitions[key] = self._partition(fresh)
        info = self._info(key)
        if info is not None:
            new.apply(info)
        self._sync_fetchers()
        log.warning(
            "log back online after a storage error",
            extra={"topic": key[0], "partition": key[1], "log_end_offset": fresh.log_end_offset},
        )

    def _info(self, key: TopicNamePartition) -> PartitionRecord | None:
        view = self.cache.topic(key[0])
        if view is None or key[1] >= len(view.partitions):
            return None
        return view.partitions[key[1]]

    def checkpoint(self) -> None:
        for state in self.partitions.values():
            try:
                state.checkpoint_hw()
            except OSError as exc:
                log_failure(log, "high watermark checkpoint failed", exc)

    async def close(self) -> None:
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()
        if self._frames is not None:
            await self._frames.aclose()
        for state in self.partitions.values():
            state.close()
        self.partitions.clear()


def now_ms() -> int:
    return int(time.time() * 1000)
