"""Consumer groups: one locked unit of work per change, and plain reads (docs/design.md §5, §7).

Every change to a group is one transaction: lock the group's row (``SELECT … FOR UPDATE``),
read its members, the database clock and the topics involved, let the caller decide (a pure
function of that snapshot; the rules live in groups/), then write the decision back —
the group row as a compare-and-set on the group epoch it read, each member row as a
compare-and-set on the member epoch it read. Changes to one group are thus serial across all
nodes, and different groups never wait on each other. Times come from the database's clock,
so nodes with skewed clocks agree on when a session lapsed.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TypeVar

from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine

from logformat.errors import ErrorCode, TierlogError
from metadata.db import single_statements
from metadata.db_errors import FOREIGN_KEY_VIOLATION, POSTGRES_DOWN, ConstraintViolation
from metadata.group_rows import AnyRow, group_of, member_of, member_values, round_doc
from metadata.schema import consumer_groups, group_members, group_offsets, topics
from metadata.types import (
    CommittedOffset,
    GroupRow,
    GroupSnapshot,
    GroupSummary,
    GroupWrite,
    TopicMeta,
)

T = TypeVar("T")
# The decision: what to write and what to answer. It gets None when the group does not exist
# (and was not to be created); it may raise to roll everything back.
Decide = Callable[[GroupSnapshot | None], tuple[GroupWrite, T]]

LOCK_TIMEOUT_MS = 10_000  # a group lock held longer than this is a stuck node: fail, don't queue


class ConcurrentChange(RuntimeError):
    """A compare-and-set lost although the row was locked: a bug, never a normal race."""


@contextmanager
def _unavailable_on_db_errors() -> Iterator[None]:
    # A lost connection or a lock wait past LOCK_TIMEOUT_MS: retriable, not the caller's fault.
    try:
        yield
    except ConstraintViolation as exc:
        if exc.sqlstate != FOREIGN_KEY_VIOLATION:
            raise
        # Offsets for a topic deleted between the snapshot and the write.
        raise TierlogError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "a topic was deleted while committing to it"
        ) from None
    except POSTGRES_DOWN as exc:
        raise TierlogError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"the group coordinator cannot reach its metadata right now: {exc}",
        ) from None


class GroupRepo:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._polls = single_statements(engine)  # every coordinator looks for lapsed sessions

    # -- the unit of work ---------------------------------------------------------------------

    def transact(
        self,
        name: str,
        decide: Decide[T],
        *,
        create: str | None = None,
        topics: Iterable[str] = (),
    ) -> T:
        """Run ``decide`` on the locked group and apply what it returns, atomically.

        ``create``: the assignor of a new group made when none is named ``name`` (None: do not
        create; ``decide`` then gets None). ``topics``: names to look up besides those the
        members subscribe to.
        """
        with _unavailable_on_db_errors(), self.engine.begin() as conn:
            conn.execute(text(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}"))
            row = self._lock(conn, name)
            if row is None and create is not None:
                conn.execute(
                    pg_insert(consumer_groups)
                    .values(name=name, assignor=create, subscribed={})
                    .on_conflict_do_nothing(index_elements=[consumer_groups.c.name])
                )
                row = self._lock(conn, name)
            if row is None:
                write, result = decide(None)
                if write != GroupWrite():
                    raise ValueError("a decision on a missing group cannot write")
                return result
            snapshot = self._snapshot(conn, group_of(row), topics)
            write, result = decide(snapshot)
            self._apply(conn, snapshot, write)
            return result

    @staticmethod
    def _lock(conn: Connection, name: str) -> AnyRow | None:
        stmt = select(consumer_groups).where(consumer_groups.c.name == name).with_for_update()
        return conn.execute(stmt).first()

    def _snapshot(self, conn: Connection, group: GroupRow, extra: Iterable[str]) -> GroupSnapshot:
        members = [
            member_of(r)
            for r in conn.execute(
                select(group_members)
                .where(group_members.c.group_id == group.id)
                .order_by(group_members.c.member_id)
            )
        ]
        now: datetime = conn.execute(select(func.clock_timestamp())).scalar_one()
        names = {t for m in members for t in m.topics} | set(group.subscribed) | set(extra)
        return GroupSnapshot(group, members, self._topics(conn, names), now)

    @staticmethod
    def _topics(conn: Connection, names: Iterable[str]) -> dict[str, TopicMeta]:
        wanted = sorted(set(names))
        if not wanted:
            return {}
        rows = conn.execute(
            select(topics.c.name, topics.c.id, topics.c.partition_count).where(
                topics.c.name.in_(wanted)
            )
        )
        return {r.name: TopicMeta(str(r.id), r.partition_count) for r in rows}

    @staticmethod
    def _apply(conn: Connection, snapshot: GroupSnapshot, write: GroupWrite) -> None:
        gid = snapshot.group.id
        if write.delete_group:
            conn.execute(delete(consumer_groups).where(consumer_groups.c.id == gid))
            return
        if write.group is not None:
            g = write.group
            done = conn.execute(
                update(consumer_groups)
                .where(
                    consumer_groups.c.id == gid,
                    consumer_groups.c.group_epoch == snapshot.group.group_epoch,
                )
                .values(
                    group_epoch=g.group_epoch,
                    assignor=g.assignor,
                    state=g.state,
                    subscribed={t: [m.id, m.partitions] for t, m in g.subscribed.items()},
                    kafka=round_doc(g.kafka),
                    updated_at=func.clock_timestamp(),
                )
            )
            if done.rowcount != 1:
                raise ConcurrentChange(f"group {snapshot.group.name!r} changed under its lock")
        if write.removed:
            conn.execute(
                delete(group_members).where(
                    group_members.c.group_id == gid,
                    group_members.c.member_id.in_(list(write.removed)),
                )
            )
        before = {m.member_id: m for m in snapshot.members}
        for m in write.members:
            old = before.get(m.member_id)
            if old is None or m.member_id in write.removed:
                conn.execute(
                    insert(group_members).values(
                        group_id=gid, member_id=m.member_id, **member_values(m)
                    )
                )
                continue
            done = conn.execute(
                update(group_members)
                .where(
                    group_members.c.group_id == gid,
                    group_members.c.member_id == m.member_id,
                    group_members.c.member_epoch == old.member_epoch,
                )
                .values(**member_values(m))
            )
            if done.rowcount != 1:
                raise ConcurrentChange(f"member {m.member_id!r} changed under its group's lock")
        for topic_id, partition in write.deleted_offsets:
            conn.execute(
                delete(group_offsets).where(
                    group_offsets.c.group_id == gid,
                    group_offsets.c.topic_id == topic_id,
                    group_offsets.c.partition == partition,
                )
            )
        if write.offsets:
            stmt = pg_insert(group_offsets).values(
                [
                    {
                        "group_id": gid,
                        "topic_id": o.topic_id,
                        "partition": o.partition,
                        "committed_offset": o.offset,
                        "metadata": o.metadata,
                    }
                    for o in write.offsets
                ]
            )
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=[
                        group_offsets.c.group_id,
                        group_offsets.c.topic_id,
                        group_offsets.c.partition,
                    ],
                    set_={
                        "committed_offset": stmt.excluded.committed_offset,
                        "metadata": stmt.excluded.metadata,
                        "committed_at": func.clock_timestamp(),
                    },
                )
            )

    # -- reads --------------------------------------------------------------------------------

    def read(self, name: str, topics: Iterable[str] = ()) -> GroupSnapshot | None:
        """The group as it is now, without locking (lapsed members included)."""
        with _unavailable_on_db_errors(), self.engine.connect() as conn:
            row = conn.execute(
                select(consumer_groups).where(consumer_groups.c.name == name)
            ).first()
            return None if row is None else self._snapshot(conn, group_of(row), topics)

    def list(self) -> builtins.list[GroupSummary]:
        live = (
            select(group_members.c.group_id, func.count().label("n"))
            .where(group_members.c.session_expires_at > func.clock_timestamp())
            .group_by(group_members.c.group_id)
            .subquery()
        )
        stmt = (
            select(
                consumer_groups.c.name,
                consumer_groups.c.state,
                consumer_groups.c.group_epoch,
                consumer_groups.c.assignor,
                func.coalesce(live.c.n, 0).label("members"),
                consumer_groups.c.created_at,
            )
            .select_from(consumer_groups.outerjoin(live, live.c.group_id == consumer_groups.c.id))
            .order_by(consumer_groups.c.name)
        )
        with _unavailable_on_db_errors(), self.engine.connect() as conn:
            return [GroupSummary(*r) for r in conn.execute(stmt)]

    def offsets(self, name: str) -> builtins.list[CommittedOffset] | None:
        """The group's committed offsets by topic and partition; None if there is no group."""
        stmt = (
            select(
                topics.c.name,
                group_offsets.c.topic_id,
                group_offsets.c.partition,
                group_offsets.c.committed_offset,
                group_offsets.c.metadata,
                group_offsets.c.committed_at,
            )
            .join(topics, topics.c.id == group_offsets.c.topic_id)
            .join(consumer_groups, consumer_groups.c.id == group_offsets.c.group_id)
            .where(consumer_groups.c.name == name)
            .order_by(topics.c.name, group_offsets.c.partition)
        )
        with _unavailable_on_db_errors(), self.engine.connect() as conn:
            exists = conn.execute(
                select(consumer_groups.c.id).where(consumer_groups.c.name == name)
            ).first()
            if exists is None:
                return None
            return [
                CommittedOffset(r[0], str(r[1]), r[2], r[3], r[4], r[5]) for r in conn.execute(stmt)
            ]

    def lapsed(self) -> builtins.list[str]:
        """Names of groups with at least one member whose session has lapsed."""
        stmt = (
            select(consumer_groups.c.name)
            .where(
                consumer_groups.c.id.in_(
                    select(group_members.c.group_id).where(
                        group_members.c.session_expires_at <= func.clock_timestamp()
                    )
                )
            )
            .order_by(consumer_groups.c.name)
        )
        with _unavailable_on_db_errors(), self._polls.connect() as conn:
            return list(conn.execute(stmt).scalars())

    def topics(self, names: Iterable[str]) -> dict[str, TopicMeta]:
        with _unavailable_on_db_errors(), self.engine.connect() as conn:
            return self._topics(conn, names)
