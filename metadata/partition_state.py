"""Leader and ISR changes, each a compare-and-set on the partition epoch; producer ids; the
cluster secret.

Every change runs in one short transaction: read the row ``FOR UPDATE``, check the expected
epochs (and, for the controller's changes, that its lease is still current), write the new
state with ``partition_epoch + 1``. A lost race returns None, never raises: the caller
re-reads the metadata and decides again. Invalid arguments (an ISR outside the replicas, a
leader outside the ISR) raise ValueError: those are bugs, not races.

ISRs are stored in replica order (the first is the preferred replica), so two ISRs with the
same members compare equal.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection, Engine

from metadata.controller_lease import ControllerFence, lease_held
from metadata.schema import brokers, cluster, of_partition, partitions, producer_ids, topics
from metadata.topics import PARTITION_COLUMNS, partition_info
from metadata.types import PartitionRecord, TopicIdPartition


def _ordered_isr(replicas: Sequence[int], new_isr: Sequence[int], where: str) -> list[int]:
    """``new_isr`` in replica order; ValueError if it names a broker that is not a replica."""
    members = set(new_isr)
    outside = sorted(members.difference(replicas))
    if outside:
        raise ValueError(
            f"{where}: ISR {list(new_isr)} has non-replicas {outside} (replicas {list(replicas)})"
        )
    return [r for r in replicas if r in members]


def _led_by(row: PartitionRecord, leader_id: int, leader_epoch: int, partition_epoch: int) -> bool:
    """The leader's changes are fenced on what it last saw: the row must still name it, at
    its leader epoch and partition epoch (else a newer change won, and it must re-read)."""
    return (row.leader, row.leader_epoch, row.partition_epoch) == (
        leader_id,
        leader_epoch,
        partition_epoch,
    )


def _name(row: PartitionRecord) -> str:
    return f"{row.topic}-{row.partition}"


def _check_ids(new_isr: Sequence[int]) -> None:
    if isinstance(new_isr, str | bytes) or not all(
        isinstance(b, int) and not isinstance(b, bool) for b in new_isr
    ):
        raise ValueError(f"an ISR is a list of broker ids, got {new_isr!r}")


class PartitionStateRepo:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- reads --------------------------------------------------------------------------------

    def get(self, tp: TopicIdPartition) -> PartitionRecord | None:
        with self.engine.connect() as conn:
            return self._get(conn, tp, lock=False)

    @staticmethod
    def _get(conn: Connection, tp: TopicIdPartition, *, lock: bool) -> PartitionRecord | None:
        stmt = (
            select(*PARTITION_COLUMNS)
            .join(topics, topics.c.id == partitions.c.topic_id)
            .where(of_partition(partitions, tp))
        )
        if lock:
            stmt = stmt.with_for_update(of=partitions)
        row = conn.execute(stmt).first()
        return None if row is None else partition_info(row)

    # -- the leader's AlterPartition ----------------------------------------------------------

    def alter_isr(
        self,
        tp: TopicIdPartition,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: Sequence[int],
    ) -> PartitionRecord | None:
        """The leader shrinks or expands the ISR (Kafka's AlterPartition).

        Succeeds only if the row still names ``leader_id`` as leader at ``leader_epoch`` and
        ``partition_epoch``; bumps partition_epoch, not the leader epoch. ``new_isr`` must
        contain the leader and be a subset of the replicas (else ValueError). A broker that is
        added to the ISR must be live (as KRaft refuses to add fenced brokers, KIP-841):
        otherwise the change is refused like a lost race (None), so a zombie replica of a
        dead broker cannot slip back into the ISR the controller just removed it from.
        """
        _check_ids(new_isr)
        if leader_id not in new_isr:
            raise ValueError(f"the new ISR {list(new_isr)} must contain the leader {leader_id}")
        with self.engine.begin() as conn:
            row = self._get(conn, tp, lock=True)
            if row is None:
                return None
            isr = _ordered_isr(row.replicas, new_isr, _name(row))
            if not _led_by(row, leader_id, leader_epoch, partition_epoch):
                return None
            added = sorted(set(isr).difference(row.isr))
            if added and not set(added) <= self._live(conn, added):
                return None
            return self._write(conn, row, leader_id, isr, bump_leader_epoch=False)

    def hand_over(
        self,
        tp: TopicIdPartition,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        to: int | None = None,
        *,
        leave_isr: bool | None = None,
    ) -> PartitionRecord | None:
        """The leader hands the partition to another in-sync replica, in a new leader epoch.
        Fenced like ``alter_isr`` on the leader's epochs; None when the race is lost or the
        successor is not a live ISR member.

        - ``to=None``: it resigns because it cannot serve the partition (its log went offline,
          its copy is corrupt): the first live ISR member in replica order leads, and the
          resigning broker leaves the ISR (it rejoins once caught up, as any follower). With
          no other live in-sync replica it stays leader: going offline would help no one.
        - ``to=replica``: a planned move (back to the preferred replica) once ``to`` holds
          everything the leader wrote; the ISR stays as it is.
        - ``leave_isr``: whether the leader leaves the ISR (default: when ``to`` is None); a
          broker shutting down hands a partition to a chosen replica and leaves it.
        """
        with self.engine.begin() as conn:
            row = self._get(conn, tp, lock=True)
            if row is None or not _led_by(row, leader_id, leader_epoch, partition_epoch):
                return None
            others = [r for r in row.replicas if r in row.isr and r != leader_id]
            candidates = others if to is None else [r for r in others if r == to]
            live = self._live(conn, candidates) if candidates else set()
            successor = next((r for r in candidates if r in live), None)
            if successor is None:
                return None
            leave = to is None if leave_isr is None else leave_isr
            isr = [r for r in row.isr if r != leader_id] if leave else row.isr
            return self._write(conn, row, successor, isr, bump_leader_epoch=True)

    # -- the controller's changes -------------------------------------------------------------

    def elect_leader(
        self,
        tp: TopicIdPartition,
        new_leader: int | None,
        new_isr: Sequence[int],
        expected_partition_epoch: int,
        fence: ControllerFence | None = None,
    ) -> PartitionRecord | None:
        """Set the leader (None = offline) and ISR; bumps leader_epoch and partition_epoch.

        ``new_leader`` must be a replica in ``new_isr``; ``new_isr`` a subset of the replicas.
        With ``fence``, the change commits only while that controller lease is current.
        """
        _check_ids(new_isr)
        if new_leader is not None and new_leader not in new_isr:
            raise ValueError(f"the new leader {new_leader} must be in the new ISR {list(new_isr)}")
        with self.engine.begin() as conn:
            found = self._controller_row(conn, tp, new_isr, expected_partition_epoch, fence)
            if found is None:
                return None
            row, isr = found
            return self._write(conn, row, new_leader, isr, bump_leader_epoch=True)

    def controller_alter_isr(
        self,
        tp: TopicIdPartition,
        new_isr: Sequence[int],
        expected_partition_epoch: int,
        fence: ControllerFence | None = None,
    ) -> PartitionRecord | None:
        """The controller changes the ISR under the current leader (fencing dead brokers out).

        Bumps partition_epoch only: the leader keeps leading at the same leader epoch and
        learns the new ISR from the metadata (its own next alter_isr loses the CAS and it
        re-reads). ``new_isr`` must contain the current leader, if there is one.
        """
        _check_ids(new_isr)
        with self.engine.begin() as conn:
            found = self._controller_row(conn, tp, new_isr, expected_partition_epoch, fence)
            if found is None:
                return None
            row, isr = found
            if row.leader is not None and row.leader not in isr:
                raise ValueError(
                    f"{_name(row)}: the new ISR {list(new_isr)} must keep the leader {row.leader}"
                )
            return self._write(conn, row, row.leader, isr, bump_leader_epoch=False)

    def _controller_row(
        self,
        conn: Connection,
        tp: TopicIdPartition,
        new_isr: Sequence[int],
        expected_partition_epoch: int,
        fence: ControllerFence | None,
    ) -> tuple[PartitionRecord, list[int]] | None:
        """The row, locked, and ``new_isr`` in its replica order, for a controller's change;
        None if the lease was lost, the partition is gone or its epoch moved on (a lost race).
        """
        if fence is not None and not lease_held(conn, fence):
            return None
        row = self._get(conn, tp, lock=True)
        if row is None:
            return None
        isr = _ordered_isr(row.replicas, new_isr, _name(row))
        if row.partition_epoch != expected_partition_epoch:
            return None
        return row, isr

    def _write(
        self,
        conn: Connection,
        row: PartitionRecord,
        leader: int | None,
        isr: list[int],
        *,
        bump_leader_epoch: bool,
    ) -> PartitionRecord:
        # The row is locked FOR UPDATE by this transaction, so the epochs read are current.
        values: dict[str, object] = {
            "leader": leader,
            "isr": isr,
            "partition_epoch": row.partition_epoch + 1,
        }
        if bump_leader_epoch:
            values["leader_epoch"] = row.leader_epoch + 1
        conn.execute(update(partitions).where(of_partition(partitions, row.tp)).values(**values))
        return row._replace(
            leader=leader,
            isr=isr,
            partition_epoch=row.partition_epoch + 1,
            leader_epoch=row.leader_epoch + (1 if bump_leader_epoch else 0),
        )

    @staticmethod
    def _live(conn: Connection, ids: Sequence[int]) -> set[int]:
        stmt = select(brokers.c.id).where(
            brokers.c.id.in_(list(ids)), brokers.c.lease_expires_at > func.now()
        )
        return set(conn.execute(stmt).scalars())

    # -- producer ids and the cluster secret --------------------------------------------------

    def allocate_producer_id(self) -> int:
        """A new idempotent-producer id: unique cluster-wide, never reused (a sequence)."""
        with self.engine.begin() as conn:
            return int(conn.execute(select(producer_ids.next_value())).scalar_one())

    def cluster_id(self) -> str:
        """The cluster's id (made by migration 0002): what Kafka clients see as cluster.id."""
        with self.engine.connect() as conn:
            return str(
                conn.execute(select(cluster.c.cluster_id).where(cluster.c.id == 1)).scalar_one()
            )

    def cluster_secret(self) -> str:
        """The shared secret authenticating cluster-internal HTTP (made by migration 0002)."""
        with self.engine.connect() as conn:
            return str(conn.execute(select(cluster.c.secret).where(cluster.c.id == 1)).scalar_one())
