"""The controller: leader election and ISR upkeep, run by whichever broker holds the lease.

Every broker calls ``Controller.tick()`` from a worker thread every ``controller_tick_ms``
(500 ms by default: a sixth of the default lease) while it is the controller, and otherwise
once the holder's lease may have lapsed (``due``); every broker also ticks at once when the
metadata version moves (a release, a new holder, a partition changed) and when a peer's
connections drop (ingest/replication/death_signal.py). A broker whose lease lapses silently
(paused, cut off) is seen at the first look after the lapse. A tick first acquires or
renews the controller lease (``metadata.controller_lease``); only the holder goes on to:

1. read the brokers (liveness by the database clock, plus each broker's incarnation) and one
   consistent snapshot of topics and partitions;
2. for every partition whose leader is gone (None, not live, restarted, or not a replica any
   more), elect the first replica, in replica order, that is in the ISR and live; the new ISR
   is the old ISR's live members. With no such replica: an unclean election (first live
   replica, ISR = [it]) if the topic sets ``unclean.leader.election.enable``, else the
   partition goes offline (leader None) keeping its last ISR, so that the first ISR member
   to come back is elected cleanly;
3. for a partition with a healthy leader, fence dead brokers out of the ISR (ISR ∩ live,
   never dropping the leader) without bumping the leader epoch.

Moving leadership back to the preferred replica is not the controller's: only the leader
knows when the preferred follower holds everything it acknowledged, acks=1 writes included,
and only it can stop acknowledging while leadership moves (ingest/replication/preferred_leader.py).

Every write is a compare-and-set on the partition epoch, fenced on this controller's lease
epoch (it commits only while the lease is current), so a paused controller that lost its
lease cannot overwrite its successor. A lost race is not an error: the next tick re-reads.

A broker that re-registered (its incarnation moved) since the previous tick is treated as
having restarted: it may have lost unflushed data, so it leaves every ISR and loses its
leaderships, unless it is the only ISR member left (then it is re-elected with a new epoch).
Each tick that finds nothing changed (same metadata version, same live brokers) skips the
partition scan: the steady-state cost is three small queries.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from sqlalchemy.engine import Engine

from cluster.clock import SYSTEM_CLOCK, Clock
from ingest.metrics import ReplicationMetrics
from metadata.brokers import BrokerRepo
from metadata.configs import SPECS
from metadata.controller_lease import ControllerFence, ControllerLease
from metadata.partition_state import PartitionStateRepo
from metadata.topics import TopicRepo
from metadata.types import PartitionRecord, TopicIdPartition

log = logging.getLogger("tierlog.controller")

UNCLEAN = "unclean.leader.election.enable"


@dataclass(frozen=True)
class ControllerAction:
    kind: str  # "elect" | "unclean_elect" | "offline" | "isr_shrink"
    topic: str
    partition: int
    old_leader: int | None
    new_leader: int | None
    old_isr: list[int]
    new_isr: list[int]
    leader_epoch: int  # after the change
    partition_epoch: int  # after the change


@dataclass
class ControllerActions:
    """What one tick did. ``active``: this broker held the controller lease."""

    active: bool
    epoch: int | None = None  # the controller epoch while active
    scanned: bool = False  # False when nothing had changed since the last tick
    actions: list[ControllerAction] = field(default_factory=list)
    lost_races: int = 0  # CAS attempts that lost (retried next tick)

    def kinds(self) -> list[str]:
        return [a.kind for a in self.actions]


@dataclass
class _Tick:
    live: set[int]  # live and not restarted since the previous tick
    restarted: set[int]  # live, but re-registered since the previous tick
    fence: ControllerFence
    result: ControllerActions


class Controller:
    def __init__(
        self,
        engine: Engine,
        broker_id: int,
        lease_ms: int,
        *,
        metrics: ReplicationMetrics,
        logger: logging.Logger = log,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.broker_id = broker_id
        self._monotonic = clock.monotonic
        self._retry_at = 0.0  # while another broker holds the lease: when it may lapse
        self._seen_version = -1  # the metadata version the last `due` was asked with
        self.metrics = metrics
        self.lease_ms = lease_ms
        self.log = logger
        self.lease = ControllerLease(engine)
        self.brokers = BrokerRepo(engine)
        self.topics = TopicRepo(engine)
        self.repo = PartitionStateRepo(engine)
        self._lock = threading.Lock()
        self._epoch: int | None = None
        self._reset()
        metrics.active_controller.set_function(lambda: int(self._epoch is not None))
        # The partitions found leaderless in this term: only the controller knows them all.
        metrics.offline_partitions_count.set_function(
            lambda: len(self._offline) if self._epoch is not None else 0
        )

    def _reset(self) -> None:
        """Forget everything learned in a term: a new term starts from the database."""
        self._incarnations: dict[int, int] = {}
        self._scan_key: tuple[int, frozenset[int]] | None = None
        self._offline: set[TopicIdPartition] = set()  # offline partitions already reported

    def due(self, metadata_version: int) -> bool:
        """Whether a periodic tick has anything to do: always for the controller; for the
        others, once the holder's lease may have lapsed, or a third of a lease on (a tick
        before that could only fail to acquire it: one statement per broker five times a
        second, a quarter of an idle broker's CPU), and once for each metadata version not
        seen before (a release or a new holder moves it)."""
        seen, self._seen_version = self._seen_version, metadata_version
        return (
            self._epoch is not None
            or metadata_version != seen
            or self._monotonic() >= self._retry_at
        )

    @property
    def epoch(self) -> int | None:
        """The controller epoch while this broker is the controller, else None."""
        return self._epoch

    # -- the lease ------------------------------------------------------------------------------

    def tick(self) -> ControllerActions:
        """One round: renew or acquire the lease and, if held, bring partitions in line."""
        with self._lock:
            epoch = self.lease.try_acquire(self.broker_id, self.lease_ms)
            if epoch is None:
                # Capped: a lease can also end early (a broker proven dead, a test's pinned
                # lease let go), and a third of a lease late is the most that may cost.
                wait = min(self.lease.lapses_in_s(), self.lease_ms / 3000)
                self._retry_at = self._monotonic() + wait
                if self._epoch is not None:
                    self.log.info(
                        "controller lease lost",
                        extra={"broker_id": self.broker_id, "controller_epoch": self._epoch},
                    )
                    self._epoch = None
                    self._reset()
                return ControllerActions(active=False)
            if epoch != self._epoch:
                self._reset()
                self._epoch = epoch
                self.log.info(
                    "became controller",
                    extra={"broker_id": self.broker_id, "controller_epoch": epoch},
                )
            return self._run(epoch)

    def resign(self) -> None:
        """Give the lease up (clean shutdown) so another broker takes over at once."""
        with self._lock:
            if self._epoch is not None:
                self.lease.release(self.broker_id)
                self.log.info(
                    "controller resigned",
                    extra={"broker_id": self.broker_id, "controller_epoch": self._epoch},
                )
            self._epoch = None
            self._reset()

    # -- one round ------------------------------------------------------------------------------

    def _run(self, epoch: int) -> ControllerActions:
        brokers = self.brokers.list()
        restarted = {
            b.id
            for b in brokers
            if b.alive and self._incarnations.get(b.id, b.incarnation) != b.incarnation
        }
        self._incarnations = {b.id: b.incarnation for b in brokers}
        live = {b.id for b in brokers if b.alive} - restarted
        tick = _Tick(
            live,
            restarted,
            ControllerFence(self.broker_id, epoch),
            ControllerActions(active=True, epoch=epoch),
        )
        if not restarted and self._scan_key == (self.topics.version(), frozenset(live)):
            return tick.result
        version, infos, parts = self.topics.snapshot()
        default = SPECS[UNCLEAN].default
        unclean = {t.id: t.configs.get(UNCLEAN, default) == "true" for t in infos}
        tick.result.scanned = True
        seen: set[TopicIdPartition] = set()
        for p in parts:
            seen.add(p.tp)
            self._partition(p, unclean.get(p.topic_id, False), tick)
        self._offline &= seen
        # Restarts are handled once; lost races must be retried: neither may be skipped.
        clean = not restarted and tick.result.lost_races == 0
        self._scan_key = (version, frozenset(live)) if clean else None
        return tick.result

    def _partition(self, p: PartitionRecord, unclean: bool, t: _Tick) -> None:
        key = p.tp
        if p.leader is None or p.leader not in t.live or p.leader not in p.replicas:
            self._elect(p, unclean, t)
            return
        self._offline.discard(key)
        keep = [b for b in p.isr if b in t.live and b in p.replicas]
        if p.leader not in keep:
            keep.append(p.leader)  # never below the leader itself
        if set(keep) != set(p.isr):
            info = self.repo.controller_alter_isr(p.tp, keep, p.partition_epoch, t.fence)
            self._record(t, "isr_shrink", p, info, "dead brokers fenced out of the ISR")

    def _elect(self, p: PartitionRecord, unclean_enabled: bool, t: _Tick) -> None:
        key = p.tp
        in_isr = [r for r in p.replicas if r in p.isr]
        clean = [r for r in in_isr if r in t.live] or [r for r in in_isr if r in t.restarted]
        if clean:
            leader = clean[0]
            isr = [r for r in in_isr if r in t.live or r == leader]
            info = self.repo.elect_leader(p.tp, leader, isr, p.partition_epoch, t.fence)
            self._record(t, "elect", p, info, "leader elected")
            return
        alive = t.live | t.restarted
        others = [r for r in p.replicas if r in alive]
        if unclean_enabled and others:
            leader = others[0]
            info = self.repo.elect_leader(p.tp, leader, [leader], p.partition_epoch, t.fence)
            if info is not None:
                self.log.warning(
                    f"unclean leader election for {p.topic}-{p.partition}: new leader "
                    f"{leader}, none of the old ISR {p.isr} is live; records acknowledged "
                    "by the old ISR only may be lost",
                    extra=self._extra(p, info, "unclean_elect"),
                )
            self._record(t, "unclean_elect", p, info, None)
            return
        if p.leader is None:  # already offline: wait for an ISR member to return
            if key not in self._offline:
                self._offline.add(key)
                self.log.error(
                    f"partition {p.topic}-{p.partition} is offline: no in-sync replica is "
                    f"live (ISR {p.isr}, live replicas {others})",
                    extra={
                        "topic": p.topic,
                        "partition": p.partition,
                        "isr": p.isr,
                        "live_replicas": others,
                        "unclean_enabled": unclean_enabled,
                    },
                )
            return
        isr = [r for r in p.isr if r in p.replicas]
        info = self.repo.elect_leader(p.tp, None, isr, p.partition_epoch, t.fence)
        if info is not None:
            self._offline.add(key)
            self.log.error(
                f"partition {p.topic}-{p.partition} is offline: leader {p.leader} is gone "
                f"and no in-sync replica is live (ISR kept as {isr}; live replicas {others}; "
                f"unclean election {'on' if unclean_enabled else 'off'})",
                extra=self._extra(p, info, "offline"),
            )
        self._record(t, "offline", p, info, None)

    # -- bookkeeping ----------------------------------------------------------------------------

    def _record(
        self, t: _Tick, kind: str, p: PartitionRecord, info: PartitionRecord | None, msg: str | None
    ) -> None:
        if info is None:
            t.result.lost_races += 1
            self.log.info(
                "controller change lost a race; retrying next tick",
                extra={
                    "topic": p.topic,
                    "partition": p.partition,
                    "change": kind,
                    "partition_epoch": p.partition_epoch,
                },
            )
            return
        _count(self.metrics, kind)
        t.result.actions.append(
            ControllerAction(
                kind,
                p.topic,
                p.partition,
                p.leader,
                info.leader,
                p.isr,
                info.isr,
                info.leader_epoch,
                info.partition_epoch,
            )
        )
        if msg is not None:
            self.log.info(f"{msg}: {p.topic}-{p.partition}", extra=self._extra(p, info, kind))

    def _extra(self, p: PartitionRecord, info: PartitionRecord, kind: str) -> dict[str, object]:
        return {
            "change": kind,
            "topic": p.topic,
            "partition": p.partition,
            "old_leader": p.leader,
            "leader": info.leader,
            "old_isr": p.isr,
            "isr": info.isr,
            "leader_epoch": info.leader_epoch,
            "partition_epoch": info.partition_epoch,
            "controller_epoch": self._epoch,
        }


def _count(metrics: ReplicationMetrics, kind: str) -> None:
    """Kafka's controller meters (elections) and IsrShrinksPerSec, as counters."""
    if kind in ("elect", "unclean_elect"):
        metrics.leader_elections.inc()
    if kind == "unclean_elect":
        metrics.unclean_leader_elections.inc()
    if kind == "isr_shrink":
        metrics.isr_shrinks.inc()
