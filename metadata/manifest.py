"""Sealed segments to tier, and the cold manifest (DESIGN §4; Kafka's RemoteLogMetadataManager).

hot_segments (one row per sealed segment, registered by the partition's leader):

    sealed ──claim──▶ tiering ──mark_tiered──▶ tiered
      ▲                 │
      └──release(error)─┘   (or the claim lease expires: another worker takes it over)

Only the lowest untiered segment of a partition is claimable, so a partition's files reach
Delta in offset order (its txn idempotence relies on that). Every claim bumps `attempts`,
which is also the claim's fencing token: a worker whose lease expired and was taken over can
no longer move the segment or its manifest rows.

cold_files (the manifest; one row per uploaded data file):

    copy_started ──▶ copied ──▶ committed ──▶ delete_started ──▶ deleted
         └─────────────┴──(superseded attempt)──▶ delete_started

A file is `committed` only after its Delta commit, in the same transaction that marks its
segment tiered; readers use committed rows only. An attempt that crashed or lost its claim
leaves a copy_started/copied row; the commit of the segment turns those into delete_started
(their objects were never in the Delta table, so they can go at once). `base_offset` and
`last_offset` are the offset range the file covers: its segment's [base, end - 1].
"""

from __future__ import annotations

import builtins
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, exists, func, insert, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine, Row

from metadata.schema import cold_files, hot_segments, topics
from metadata.types import ColdFile, FileSpec, HotSegment, SegmentClaim, Untiered

AnyRow = Row[*tuple[Any, ...]]
__all__ = [
    "ClaimLostError",
    "ColdFile",
    "ColdManifest",
    "FileSpec",
    "HotSegment",
    "SegmentClaim",
    "SegmentRegistry",
    "Untiered",
]
COLD_STATES = ("copy_started", "copied", "committed", "delete_started", "deleted")


class ClaimLostError(RuntimeError):
    """The claim expired and another worker took the segment over (or it is already tiered)."""


def _cold(row: AnyRow) -> ColdFile:
    return ColdFile(*(row._mapping[c.name] for c in cold_files.columns))


def _fence(claim: SegmentClaim) -> Any:
    """The segment row still belongs to this claim."""
    return and_(
        hot_segments.c.topic_id == claim.topic_id,
        hot_segments.c.partition == claim.partition,
        hot_segments.c.base_offset == claim.base_offset,
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
        self, topic_id: str, partition: int, base_offset: int, end_offset: int, size_bytes: int
    ) -> None:
        """Record a sealed segment (idempotent: a re-registration after a restart is a no-op)."""
        stmt = (
            pg_insert(hot_segments)
            .values(
                topic_id=topic_id,
                partition=partition,
                base_offset=base_offset,
                end_offset=end_offset,
                size_bytes=size_bytes,
            )
            .on_conflict_do_nothing()
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)

    def claim(self, worker_id: str, lease_ms: int, limit: int = 1) -> list[SegmentClaim]:
        """Claim up to `limit` segments, oldest first, each the lowest untiered one of its
        partition; an expired claim is claimable again."""
        lease = _ms(lease_ms)
        lower = hot_segments.alias("lower")
        now = func.now()
        candidates = (
            select(hot_segments.c.topic_id, hot_segments.c.partition, hot_segments.c.base_offset)
            .where(
                hot_segments.c.state != "tiered",
                ~exists().where(
                    lower.c.topic_id == hot_segments.c.topic_id,
                    lower.c.partition == hot_segments.c.partition,
                    lower.c.state != "tiered",
                    lower.c.base_offset < hot_segments.c.base_offset,
                ),
                (
                    (hot_segments.c.state == "sealed")
                    & (hot_segments.c.retry_at.is_(None) | (hot_segments.c.retry_at <= now))
                )
                | ((hot_segments.c.state == "tiering") & (hot_segments.c.claim_expires_at <= now)),
            )
            .order_by(hot_segments.c.sealed_at, hot_segments.c.base_offset)
            .limit(limit)
            # Concurrent workers skip each other's rows instead of queueing on them; a row
            # another worker claimed since our snapshot is re-checked (and fails the WHERE).
            .with_for_update(skip_locked=True, of=hot_segments)
        )
        with self.engine.begin() as conn:
            keys = conn.execute(candidates).all()
            out = []
            for k in keys:
                row = conn.execute(
                    update(hot_segments)
                    .where(
                        hot_segments.c.topic_id == k.topic_id,
                        hot_segments.c.partition == k.partition,
                        hot_segments.c.base_offset == k.base_offset,
                    )
                    .values(
                        state="tiering",
                        claimed_by=worker_id,
                        claim_expires_at=now + lease,
                        attempts=hot_segments.c.attempts + 1,
                        retry_at=None,
                    )
                    .returning(hot_segments)
                ).one()
                name = conn.execute(
                    select(topics.c.name).where(topics.c.id == row.topic_id)
                ).scalar_one()
                out.append(
                    SegmentClaim(
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
                )
        return out

    def extend(self, claim: SegmentClaim, lease_ms: int) -> bool:
        """Renew the claim's lease; False if it was lost (stop working on the segment)."""
        with self.engine.begin() as conn:
            n = conn.execute(
                update(hot_segments)
                .where(_fence(claim))
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
                .where(_fence(claim))
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
        with self.engine.begin() as conn:
            locked = conn.execute(
                select(hot_segments.c.base_offset).where(_fence(claim)).with_for_update()
            ).first()
            if locked is None:
                raise ClaimLostError(_describe(claim))
            values = _file_values(claim, file)
            conn.execute(
                pg_insert(cold_files)
                .values(**values, state="committed", delta_version=delta_version)
                .on_conflict_do_update(
                    index_elements=[cold_files.c.object_key],
                    set_={
                        "state": "committed",
                        "delta_version": delta_version,
                        "updated_at": func.now(),
                    },
                )
            )
            orphans = conn.execute(
                update(cold_files)
                .where(
                    cold_files.c.topic_id == claim.topic_id,
                    cold_files.c.partition == claim.partition,
                    cold_files.c.base_offset == claim.base_offset,
                    cold_files.c.state.in_(("copy_started", "copied")),
                    cold_files.c.object_key != file.object_key,
                )
                .values(state="delete_started", delete_after=func.now(), updated_at=func.now())
                .returning(*cold_files.columns)
            ).all()
            conn.execute(
                update(hot_segments)
                .where(_fence(claim))
                .values(state="tiered", claimed_by=None, claim_expires_at=None, last_error=None)
            )
        return [_cold(r) for r in orphans]

    # -- reads ----------------------------------------------------------------------------

    def segments(self, topic_id: str, partition: int) -> builtins.list[HotSegment]:
        cols = [getattr(hot_segments.c, f) for f in HotSegment._fields]
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(*cols)
                .where(hot_segments.c.topic_id == topic_id, hot_segments.c.partition == partition)
                .order_by(hot_segments.c.base_offset)
            ).all()
        return [HotSegment(str(r[0]), *r[1:]) for r in rows]

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


def _describe(claim: SegmentClaim) -> str:
    return (
        f"claim of {claim.topic}-{claim.partition} segment {claim.base_offset} "
        f"(attempt {claim.attempt}, {claim.worker_id}) was lost"
    )


def _file_values(claim: SegmentClaim, file: FileSpec) -> dict[str, Any]:
    return {
        "topic_id": claim.topic_id,
        "partition": claim.partition,
        "base_offset": claim.base_offset,
        "last_offset": claim.end_offset - 1,
        "min_timestamp": file.min_timestamp,
        "max_timestamp": file.max_timestamp,
        "object_key": file.object_key,
        "size_bytes": file.size_bytes,
        "records": file.records,
    }


class ColdManifest:
    """The cold files of each partition and their states."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def start_copy(self, claim: SegmentClaim, file: FileSpec) -> int:
        """Record an upload about to start (copy_started); returns the row id. Raises
        ClaimLostError if the claim was lost (then nothing is recorded)."""
        values = _file_values(claim, file)
        cols = list(values)
        src = select(
            *(literal(values[c], cold_files.c[c].type) for c in cols), literal("copy_started")
        ).where(exists().where(_fence(claim)))
        with self.engine.begin() as conn:
            file_id = conn.execute(
                insert(cold_files).from_select([*cols, "state"], src).returning(cold_files.c.id)
            ).scalar()
        if file_id is None:
            raise ClaimLostError(_describe(claim))
        return int(file_id)

    def mark_copied(self, file_id: int) -> None:
        """The upload finished. Raises ClaimLostError if the row was superseded meanwhile
        (another worker committed the segment): the caller must not commit its file."""
        self._move(file_id, ("copy_started",), "copied")

    def start_delete(self, file_ids: builtins.list[int], grace_ms: int = 0) -> None:
        """committed (or superseded) → delete_started: readers in flight have `grace_ms`."""
        with self.engine.begin() as conn:
            conn.execute(
                update(cold_files)
                .where(
                    cold_files.c.id.in_(file_ids),
                    cold_files.c.state.in_(("copy_started", "copied", "committed")),
                )
                .values(
                    state="delete_started",
                    delete_after=func.now() + timedelta(milliseconds=grace_ms),
                    updated_at=func.now(),
                )
            )

    def mark_deleted(self, file_ids: builtins.list[int]) -> None:
        """delete_started → deleted: the object is gone from the bucket."""
        with self.engine.begin() as conn:
            conn.execute(
                update(cold_files)
                .where(cold_files.c.id.in_(file_ids), cold_files.c.state == "delete_started")
                .values(state="deleted", updated_at=func.now())
            )

    def _move(self, file_id: int, from_states: tuple[str, ...], to: str) -> None:
        with self.engine.begin() as conn:
            n = conn.execute(
                update(cold_files)
                .where(cold_files.c.id == file_id, cold_files.c.state.in_(from_states))
                .values(state=to, updated_at=func.now())
            ).rowcount
        if n != 1:
            raise ClaimLostError(f"cold file {file_id} is no longer in {'/'.join(from_states)}")

    # -- reads ----------------------------------------------------------------------------

    def get(self, file_id: int) -> ColdFile | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(cold_files).where(cold_files.c.id == file_id)).first()
        return None if row is None else _cold(row)

    def files(
        self, topic_id: str, partition: int, states: tuple[str, ...] = ("committed",)
    ) -> builtins.list[ColdFile]:
        """The partition's files in offset order; committed ones only unless asked."""
        with self.engine.connect() as conn:
            return self._files(conn, topic_id, partition, states)

    @staticmethod
    def _files(
        conn: Connection, topic_id: str, partition: int, states: tuple[str, ...]
    ) -> builtins.list[ColdFile]:
        rows = conn.execute(
            select(cold_files)
            .where(
                cold_files.c.topic_id == topic_id,
                cold_files.c.partition == partition,
                cold_files.c.state.in_(states),
            )
            .order_by(cold_files.c.base_offset, cold_files.c.id)
        ).all()
        return [_cold(r) for r in rows]

    def cold_range(self, topic_id: str, partition: int) -> tuple[int, int] | None:
        """[start, end) of the contiguous committed range from the partition's first cold
        file, or None when nothing is committed."""
        start: int | None = None
        end = 0
        for f in self.files(topic_id, partition):
            if start is None:
                start, end = f.base_offset, f.last_offset + 1
            elif f.base_offset <= end:
                end = max(end, f.last_offset + 1)
            else:
                break  # a gap (a file still to be committed): the range stops before it
        return None if start is None else (start, end)

    def log_start_offset(self, topic_id: str, partition: int) -> int | None:
        """The cross-tier log start the cold tier implies (retention, compaction/): the first
        committed cold offset; with nothing committed, the end of the highest removed file
        (everything below it was removed by retention); None when the partition has no cold
        history at all."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(
                    func.min(cold_files.c.base_offset).filter(cold_files.c.state == "committed"),
                    func.max(cold_files.c.last_offset + 1).filter(
                        cold_files.c.state.in_(("delete_started", "deleted"))
                    ),
                ).where(cold_files.c.topic_id == topic_id, cold_files.c.partition == partition)
            ).one()
        if row[0] is not None:
            return int(row[0])
        return None if row[1] is None else int(row[1])

    def tiered_end_offset(self, topic_id: str, partition: int) -> int | None:
        """Exclusive end of the contiguous committed cold range (None: nothing tiered)."""
        r = self.cold_range(topic_id, partition)
        return None if r is None else r[1]

    def lag(self, topic_id: str, partition: int, hw: int) -> int:
        """Records below the high watermark `hw` that are not in the cold tier yet."""
        with self.engine.connect() as conn:
            first_hot = conn.execute(
                select(func.min(hot_segments.c.base_offset)).where(
                    hot_segments.c.topic_id == topic_id, hot_segments.c.partition == partition
                )
            ).scalar()
        end = self.tiered_end_offset(topic_id, partition)
        start = end if end is not None else (first_hot if first_hot is not None else 0)
        return max(0, hw - start)
