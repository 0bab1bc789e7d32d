"""The cold manifest: one row per uploaded data file and its state (docs/design.md §4).

    copy_started ──▶ copied ──▶ committed ──▶ delete_started ──▶ deleted
         └─────────────┴──(superseded attempt)──▶ delete_started

Readers use committed rows only. Files become committed in SegmentRegistry.mark_tiered
(metadata/segment_registry.py), in the transaction that marks their segment tiered; this module
records uploads, moves files towards deletion and answers offset-range questions.
"""

from __future__ import annotations

import builtins
from datetime import timedelta

from sqlalchemy import exists, func, insert, literal, select, update
from sqlalchemy.engine import Engine

from metadata.cold_file_rows import cold_file, file_values
from metadata.log_starts import LogStarts
from metadata.schema import cold_files, hot_segments, of_partition
from metadata.segment_registry import ClaimLostError, claim_fence, describe_lost_claim
from metadata.types import ColdFile, FileSpec, SegmentClaim, TopicIdPartition

# NOTIFY'd with `topic_id:partition` when a cold file of the partition is committed or
# removed (migration 0015): brokers read that partition's manifest view again.
COLD_FILES_CHANNEL = "tierlog_cold_files"


class ColdManifest:
    """The cold files of each partition and their states."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def start_copy(self, claim: SegmentClaim, file: FileSpec) -> int:
        """Record an upload about to start (copy_started); returns the row id. Raises
        ClaimLostError if the claim was lost (then nothing is recorded)."""
        values = file_values(claim, file)
        cols = list(values)
        src = select(
            *(literal(values[c], cold_files.c[c].type) for c in cols), literal("copy_started")
        ).where(exists().where(claim_fence(claim)))
        with self.engine.begin() as conn:
            file_id = conn.execute(
                insert(cold_files).from_select([*cols, "state"], src).returning(cold_files.c.id)
            ).scalar()
        if file_id is None:
            raise ClaimLostError(describe_lost_claim(claim))
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
        return None if row is None else cold_file(row)

    def files(
        self, tp: TopicIdPartition, states: tuple[str, ...] = ("committed",)
    ) -> builtins.list[ColdFile]:
        """The partition's files in offset order; committed ones only unless asked."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(cold_files)
                .where(of_partition(cold_files, tp), cold_files.c.state.in_(states))
                .order_by(cold_files.c.base_offset, cold_files.c.id)
            ).all()
        return [cold_file(r) for r in rows]

    def topic_files(self, topic_id: str) -> builtins.list[ColdFile]:
        """Every committed file of the topic, by partition then offset (one query)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(cold_files)
                .where(cold_files.c.topic_id == topic_id, cold_files.c.state == "committed")
                .order_by(cold_files.c.partition, cold_files.c.base_offset, cold_files.c.id)
            ).all()
        return [cold_file(r) for r in rows]

    def cold_range(self, tp: TopicIdPartition) -> tuple[int, int] | None:
        """[start, end) of the contiguous committed range from the partition's first cold
        file, or None when nothing is committed."""
        start: int | None = None
        end = 0
        for f in self.files(tp):
            if start is None:
                start, end = f.base_offset, f.last_offset + 1
            elif f.base_offset <= end:
                end = max(end, f.last_offset + 1)
            else:
                break  # a gap (a file still to be committed): the range stops before it
        return None if start is None else (start, end)

    def cold_bytes(self, tp: TopicIdPartition) -> int:
        """Bytes of the partition's committed cold files (its share of the Delta table)."""
        with self.engine.connect() as conn:
            total = conn.execute(
                select(func.coalesce(func.sum(cold_files.c.size_bytes), 0)).where(
                    of_partition(cold_files, tp), cold_files.c.state == "committed"
                )
            ).scalar()
        return int(total or 0)

    def log_start_offset(self, tp: TopicIdPartition) -> int | None:
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
                ).where(of_partition(cold_files, tp))
            ).one()
        if row[0] is not None:
            return int(row[0])
        return None if row[1] is None else int(row[1])

    def deleted_before(self, tp: TopicIdPartition) -> int | None:
        """The log start DeleteRecords set (metadata/log_starts.py; None: never)."""
        return LogStarts(self.engine).get(tp)

    def tiered_end_offset(self, tp: TopicIdPartition) -> int | None:
        """Exclusive end of the contiguous committed cold range (None: nothing tiered)."""
        r = self.cold_range(tp)
        return None if r is None else r[1]

    def lag(self, tp: TopicIdPartition, hw: int) -> int:
        """Records below the high watermark `hw` that are not in the cold tier yet."""
        with self.engine.connect() as conn:
            first_hot = conn.execute(
                select(func.min(hot_segments.c.base_offset)).where(of_partition(hot_segments, tp))
            ).scalar()
        end = self.tiered_end_offset(tp)
        start = end if end is not None else (first_hot if first_hot is not None else 0)
        return max(0, hw - start)
