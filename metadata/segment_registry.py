"""Sealed segments to tier and their claims (docs/design.md §4; Kafka's RemoteLogMetadataManager,
with metadata/cold_manifest.py for the cold files).

hot_segments (one row per sealed segment, registered by the partition's leader):

    sealed ──claim──▶ tiering ──mark_tiered──▶ tiered
      ▲                 │
      └──release(error)─┘   (or the claim lease expires: another worker takes it over)

Only the lowest untiered segment of a partition is claimable (with, optionally, the run of
segments right after it, by the same claimer), so a partition's files reach Delta in offset
order (its txn idempotence relies on that). Every claim bumps `attempts`,
which is also the claim's fencing token: a worker whose lease expired and was taken over can
no longer move the segment or its manifest rows.

The cold files themselves (their states: metadata/cold_manifest.py) meet the segments in one
place here: mark_all_tiered commits the files of one Delta commit in the transaction that
marks their segments tiered, and turns the rows other attempts left (copy_started/copied:
crashed, or their claim was lost) into delete_started, since their objects were never in the
Delta table. A file covers its segment's offsets: `base_offset` to `last_offset` = the
segment's end - 1.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Table, and_, case, exists, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.sql.elements import ColumnElement

from metadata.cold_file_rows import cold_file, file_values
from metadata.schema import cold_files, hot_segments, of_partition, topics
from metadata.types import (
    ColdFile,
    FileSpec,
    HotSegment,
    SegmentClaim,
    TopicIdPartition,
    Untiered,
)

AnyRow = Row[*tuple[Any, ...]]
__all__ = [
    "ClaimLostError",
    "ColdFile",
    "FileSpec",
    "HotSegment",
    "SegmentClaim",
    "SegmentRegistry",
    "Untiered",
]
# NOTIFY'd when a segment may have become claimable (migration 0015): registered, released,
# or the one below it tiered. Idle tiering workers wait on it.
SEGMENTS_CHANNEL = "tierlog_segments"
COLD_STATES = ("copy_started", "copied", "committed", "delete_started", "deleted")


class ClaimLostError(RuntimeError):
    """The claim expired and another worker took the segment over (or it is already tiered)."""


def of_segment(table: Table, tp: TopicIdPartition, base_offset: int) -> ColumnElement[bool]:
    """One segment's rows: its hot_segments row, or the cold_files rows of its uploads."""
    return and_(of_partition(table, tp), table.c.base_offset == base_offset)


def claim_fence(claim: SegmentClaim) -> ColumnElement[bool]:
    """The segment row still belongs to this claim."""
    return and_(
        of_segment(hot_segments, claim.tp, claim.base_offset),
        hot_segments.c.state == "tiering",
        hot_segments.c.claimed_by == claim.worker_id,
        hot_segments.c.attempts == claim.attempt,
    )


def _ms(ms: int) -> timedelta:
    if ms <= 0:
        raise ValueError(f"a duration must be > 0 ms, got {ms}")
    return timedelta(milliseconds=ms)


class SegmentRegistry:
    """Sealed segments and their claims. Times are the database's (now()), never a worker's."""

    def __init__(
        self, engine: Engine, *, backoff_ms: int = 1000, max_backoff_ms: int = 60_000
    ) -> None:
        self.engine = engine
        self.backoff_ms, self.max_backoff_ms = backoff_ms, max_backoff_ms

    def register_sealed(
        self, tp: TopicIdPartition, base_offset: int, end_offset: int, size_bytes: int
    ) -> None:
        """Record a sealed segment (idempotent: a re-registration after a restart is a no-op)."""
        stmt = (
            pg_insert(hot_segments)
            .values(
                topic_id=tp.topic_id,
                partition=tp.partition,
                base_offset=base_offset,
                end_offset=end_offset,
                size_bytes=size_bytes,
            )
            .on_conflict_do_nothing()
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)

    def claim(
        self,
        worker_id: str,
        lease_ms: int,
        limit: int = 1,
        max_bytes: int | None = None,
        *,
        consecutive: bool = False,
    ) -> list[SegmentClaim]:
        """Claim up to `limit` segments, oldest first, each the lowest untiered one of its
        partition; an expired claim is claimable again. With `max_bytes`, segments stop
        once their sizes would exceed it (the first is always claimed, however big). With
        `consecutive`, room left after those is filled with the segments that directly
        follow them in their partitions (one claimer then tiers a partition's run in order,
        one Delta commit; nobody else can claim a segment while a lower one is untiered)."""
        lease = _ms(lease_ms)
        lower = hot_segments.alias("lower")
        now = func.now()
        candidates = (
            select(
                hot_segments.c.topic_id,
                hot_segments.c.partition,
                hot_segments.c.base_offset,
                hot_segments.c.end_offset,
                hot_segments.c.size_bytes,
            )
            .where(
                hot_segments.c.state != "tiered",
                ~exists().where(
                    lower.c.topic_id == hot_segments.c.topic_id,
                    lower.c.partition == hot_segments.c.partition,
                    lower.c.state != "tiered",
                    lower.c.base_offset < hot_segments.c.base_offset,
                ),
                _claimable(),
            )
            .order_by(hot_segments.c.sealed_at, hot_segments.c.base_offset)
            .limit(limit)
            # Concurrent workers skip each other's rows instead of queueing on them; a row
            # another worker claimed since our snapshot is re-checked (and fails the WHERE).
            .with_for_update(skip_locked=True, of=hot_segments)
        )
        with self.engine.begin() as conn:
            keys = _within_bytes(conn.execute(candidates).all(), max_bytes)
            if consecutive:
                keys += _followers(conn, keys, limit, max_bytes)
            return [_take(conn, k, worker_id, now + lease) for k in keys]

    def extend(self, claim: SegmentClaim, lease_ms: int) -> bool:
        """Renew the claim's lease; False if it was lost (stop working on the segment)."""
        with self.engine.begin() as conn:
            n = conn.execute(
                update(hot_segments)
                .where(claim_fence(claim))
                .values(claim_expires_at=func.now() + _ms(lease_ms))
            ).rowcount
        return n == 1

    def release(self, claim: SegmentClaim, error: str | None = None) -> bool:
        """Give the segment back (after a failure): claimable again after an exponential
        backoff on its attempts. False if the claim was already lost."""
        delay = min(self.max_backoff_ms, self.backoff_ms * 2 ** max(0, claim.attempt - 1))
        with self.engine.begin() as conn:
            n = conn.execute(
                update(hot_segments)
                .where(claim_fence(claim))
                .values(
                    state="sealed",
                    claimed_by=None,
                    claim_expires_at=None,
                    last_error=None if error is None else error[:4000],
                    retry_at=func.now() + timedelta(milliseconds=delay) if error else None,
                )
            ).rowcount
        return n == 1

    def mark_tiered(
        self, claim: SegmentClaim, file: FileSpec, delta_version: int
    ) -> builtins.list[ColdFile]:
        """The segment's file is in the Delta table at `delta_version`: commit it to the
        manifest and mark the segment tiered, in one transaction. Returns the superseded
        attempts' rows (now delete_started). Raises ClaimLostError if the claim was lost."""
        orphans, lost = self.mark_all_tiered([(claim, file)], delta_version)
        if lost:
            raise ClaimLostError(describe_lost_claim(claim))
        return orphans

    def mark_all_tiered(
        self, done: Sequence[tuple[SegmentClaim, FileSpec]], delta_version: int
    ) -> tuple[builtins.list[ColdFile], builtins.list[SegmentClaim]]:
        """mark_tiered for the segments of one Delta commit, in ONE transaction. A claim lost
        meanwhile is skipped (its new owner records the same file from the table) and
        returned; the others are marked. Returns (superseded rows, lost claims)."""
        orphans: builtins.list[ColdFile] = []
        lost: builtins.list[SegmentClaim] = []
        with self.engine.begin() as conn:
            for claim, file in done:
                locked = conn.execute(
                    select(hot_segments.c.base_offset).where(claim_fence(claim)).with_for_update()
                ).first()
                if locked is None:
                    lost.append(claim)
                    continue
                orphans += _commit_file(conn, claim, file, delta_version)
        return orphans, lost

    # -- reads ----------------------------------------------------------------------------

    def segments(self, tp: TopicIdPartition) -> builtins.list[HotSegment]:
        cols = [getattr(hot_segments.c, f) for f in HotSegment._fields]
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(*cols)
                .where(of_partition(hot_segments, tp))
                .order_by(hot_segments.c.base_offset)
            ).all()
        return [HotSegment(str(r[0]), *r[1:]) for r in rows]

    def next_due_s(self) -> float | None:
        """Seconds until a segment that no NOTIFY will announce may become claimable: a
        released one's retry_at, a claim's lease running out; None when none is ahead."""
        deadline = case(
            (hot_segments.c.state == "tiering", hot_segments.c.claim_expires_at),
            else_=hot_segments.c.retry_at,
        )
        stmt = select(func.extract("epoch", func.min(deadline) - func.now())).where(
            hot_segments.c.state != "tiered", deadline > func.now()
        )
        with self.engine.connect() as conn:
            seconds = conn.execute(stmt).scalar()
        return None if seconds is None else float(seconds)

    def untiered(self) -> builtins.list[Untiered]:
        """Per partition: the sealed segments not yet tiered (for lag metrics)."""
        stmt = (
            select(
                topics.c.name,
                hot_segments.c.partition,
                func.count(),
                func.sum(hot_segments.c.end_offset - hot_segments.c.base_offset),
                func.sum(hot_segments.c.size_bytes),
            )
            .join(topics, topics.c.id == hot_segments.c.topic_id)
            .where(hot_segments.c.state != "tiered")
            .group_by(topics.c.name, hot_segments.c.partition)
            .order_by(topics.c.name, hot_segments.c.partition)
        )
        with self.engine.connect() as conn:
            return [
                Untiered(r[0], r[1], int(r[2]), int(r[3]), int(r[4])) for r in conn.execute(stmt)
            ]


def _claimable() -> ColumnElement[bool]:
    """Sealed and not backing off, or claimed under a lease that expired."""
    now = func.now()
    return (
        (hot_segments.c.state == "sealed")
        & (hot_segments.c.retry_at.is_(None) | (hot_segments.c.retry_at <= now))
    ) | ((hot_segments.c.state == "tiering") & (hot_segments.c.claim_expires_at <= now))


def _followers(
    conn: Connection, leads: Sequence[AnyRow], limit: int, max_bytes: int | None
) -> builtins.list[AnyRow]:
    """The claimable segments right after each lead in its partition, without a gap, within
    what `limit` and `max_bytes` leave."""
    room = limit - len(leads)
    left = None if max_bytes is None else max_bytes - sum(k.size_bytes for k in leads)
    out: builtins.list[AnyRow] = []
    for lead in leads:
        if room <= 0:
            break
        rows = conn.execute(
            select(
                hot_segments.c.topic_id,
                hot_segments.c.partition,
                hot_segments.c.base_offset,
                hot_segments.c.end_offset,
                hot_segments.c.size_bytes,
                _claimable().label("claimable"),
            )
            .where(
                of_partition(hot_segments, TopicIdPartition(lead.topic_id, lead.partition)),
                hot_segments.c.base_offset > lead.base_offset,
                hot_segments.c.state != "tiered",
            )
            .order_by(hot_segments.c.base_offset)
            .limit(room)
            .with_for_update(skip_locked=True)
        ).all()
        end = lead.end_offset
        for r in rows:
            if (
                r.base_offset != end
                or not r.claimable
                or (left is not None and r.size_bytes > left)
            ):
                break  # a gap (a row another worker holds), backing off, or too big
            out.append(r)
            end, room = r.end_offset, room - 1
            left = None if left is None else left - r.size_bytes
    return out


def _take(conn: Connection, k: AnyRow, worker_id: str, expires: Any) -> SegmentClaim:
    """Claim the segment `k` (locked by the caller's transaction)."""
    row = conn.execute(
        update(hot_segments)
        .where(of_segment(hot_segments, TopicIdPartition(k.topic_id, k.partition), k.base_offset))
        .values(
            state="tiering",
            claimed_by=worker_id,
            claim_expires_at=expires,
            attempts=hot_segments.c.attempts + 1,
            retry_at=None,
        )
        .returning(hot_segments)
    ).one()
    name = conn.execute(select(topics.c.name).where(topics.c.id == row.topic_id)).scalar_one()
    return SegmentClaim(
        str(row.topic_id),
        name,
        row.partition,
        row.base_offset,
        row.end_offset,
        row.size_bytes,
        row.attempts,
        worker_id,
        row.claim_expires_at,
    )


def _within_bytes(keys: Sequence[AnyRow], max_bytes: int | None) -> builtins.list[AnyRow]:
    out: builtins.list[AnyRow] = []
    total = 0
    for k in keys:
        if out and max_bytes is not None and total + k.size_bytes > max_bytes:
            break
        out.append(k)
        total += k.size_bytes
    return out


def _commit_file(
    conn: Connection, claim: SegmentClaim, file: FileSpec, delta_version: int
) -> builtins.list[ColdFile]:
    """Inside mark_all_tiered's transaction, for a claim whose fence is locked: the file
    committed, the other attempts' rows delete_started (returned), the segment tiered."""
    values = file_values(claim, file)
    conn.execute(
        pg_insert(cold_files)
        .values(**values, state="committed", delta_version=delta_version)
        .on_conflict_do_update(
            index_elements=[cold_files.c.object_key],
            set_={"state": "committed", "delta_version": delta_version, "updated_at": func.now()},
        )
    )
    orphans = conn.execute(
        update(cold_files)
        .where(
            of_segment(cold_files, claim.tp, claim.base_offset),
            cold_files.c.state.in_(("copy_started", "copied")),
            cold_files.c.object_key != file.object_key,
        )
        .values(state="delete_started", delete_after=func.now(), updated_at=func.now())
        .returning(*cold_files.columns)
    ).all()
    conn.execute(
        update(hot_segments)
        .where(claim_fence(claim))
        .values(state="tiered", claimed_by=None, claim_expires_at=None, last_error=None)
    )
    return [cold_file(r) for r in orphans]


def describe_lost_claim(claim: SegmentClaim) -> str:
    return (
        f"claim of {claim.topic}-{claim.partition} segment {claim.base_offset} "
        f"(attempt {claim.attempt}, {claim.worker_id}) was lost"
    )
