"""The manifest moves compaction makes (metadata/cold_manifest.py keeps the states; this
module only adds compaction's transactions over the same tables).

- **Retire**: committed → delete_started with delete_after = now + grace (retention, rewrites).
- **Stage / swap** (rewrites): the new file's row is recorded copy_started before its upload
  (so a crash leaves a row that names the object), copied after it, and after the Delta
  commit one transaction retires the old rows and commits the new one. A reader resolving
  offsets through committed rows sees either the old files or the new one, never both and
  never neither.
- **Sweep**: delete_started rows past delete_after, whose objects may now go.
- **Partition lock**: a session advisory lock per (topic, partition) so that two compaction
  workers never rewrite the same partition at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta

from sqlalchemy import and_, exists, func, insert, select, update
from sqlalchemy.engine import Engine

from metadata.cold_file_rows import cold_file, cold_file_values
from metadata.schema import cold_files, hot_segments, of_partition
from metadata.types import ColdFile, FileSpec, TopicIdPartition

# Object keys of files written by compaction carry one of these in their unique part (tiering's
# are "-{uuid hex}", which can hold neither): they tell a crashed rewrite's staged row from a
# tiering attempt's, and a key-compacted file from a merely merged one.
MERGED_MARK = "-mg"
COMPACTED_MARK = "-kc"
ERASED_MARK = "-er"  # files an erasure rewrote (compaction/erasure_job.py)
_LOCK_CLASS = 0x746C  # advisory lock namespace ("tl"); the second key hashes the partition


class SwapConflictError(RuntimeError):
    """An old file is no longer committed: someone else changed the partition meanwhile."""


class CompactionManifest:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextlib.contextmanager
    def partition_lock(self, tp: TopicIdPartition) -> Iterator[bool]:
        """Try the partition's advisory lock for the duration of the block (yields whether it
        was acquired). Session-level: it survives the connection's transactions and dies
        with its session if this process does."""
        key = func.hashtext(f"{tp.topic_id}/{tp.partition}")
        with self.engine.connect() as conn:
            got = bool(conn.execute(select(func.pg_try_advisory_lock(_LOCK_CLASS, key))).scalar())
            conn.commit()
            try:
                yield got
            finally:
                if got:
                    conn.execute(select(func.pg_advisory_unlock(_LOCK_CLASS, key)))
                    conn.commit()

    def tiering_busy(self, tp: TopicIdPartition) -> bool:
        """A tiering worker holds a live claim on one of the partition's segments."""
        with self.engine.connect() as conn:
            return bool(
                conn.execute(
                    select(
                        exists().where(
                            of_partition(hot_segments, tp),
                            hot_segments.c.state == "tiering",
                            hot_segments.c.claim_expires_at > func.now(),
                        )
                    )
                ).scalar()
            )

    def untiered_bytes(self, tp: TopicIdPartition) -> int:
        """Bytes of the partition's sealed segments not in the cold tier yet (hot-only data
        for retention.bytes; the active segment is not registered, so it is not counted)."""
        with self.engine.connect() as conn:
            n = conn.execute(
                select(func.coalesce(func.sum(hot_segments.c.size_bytes), 0)).where(
                    of_partition(hot_segments, tp),
                    hot_segments.c.state != "tiered",
                )
            ).scalar()
        return int(n or 0)

    def retire(self, file_ids: list[int], grace_ms: int) -> int:
        """committed → delete_started, deletable after `grace_ms`; returns rows moved."""
        if not file_ids:
            return 0
        with self.engine.begin() as conn:
            return conn.execute(
                update(cold_files)
                .where(cold_files.c.id.in_(file_ids), cold_files.c.state == "committed")
                .values(
                    state="delete_started",
                    delete_after=func.now() + timedelta(milliseconds=max(0, grace_ms)),
                    updated_at=func.now(),
                )
            ).rowcount

    def stage(
        self, tp: TopicIdPartition, base_offset: int, last_offset: int, file: FileSpec
    ) -> int:
        """Record a rewrite's file before its upload (copy_started); returns the row id."""
        with self.engine.begin() as conn:
            return int(
                conn.execute(
                    insert(cold_files)
                    .values(
                        **cold_file_values(tp, base_offset, last_offset, file),
                        state="copy_started",
                    )
                    .returning(cold_files.c.id)
                ).scalar_one()
            )

    def swap(
        self,
        new_ids: list[int],
        old_ids: list[int],
        delta_version: int,
        grace_ms: int,
        *,
        new_states: tuple[str, ...] = ("copied",),
    ) -> None:
        """In one transaction: the old rows (all still committed, else SwapConflictError and
        nothing changes) → delete_started with grace; the new rows (in `new_states`: copied,
        or also copy_started when `recover` found them in the table) → committed."""
        with self.engine.begin() as conn:
            old = conn.execute(
                select(cold_files.c.id, cold_files.c.state)
                .where(cold_files.c.id.in_(old_ids))
                .with_for_update()
            ).all()
            if len(old) != len(set(old_ids)) or any(r.state != "committed" for r in old):
                raise SwapConflictError(f"cold files {sorted(old_ids)} are not all committed")
            conn.execute(
                update(cold_files)
                .where(cold_files.c.id.in_(old_ids))
                .values(
                    state="delete_started",
                    delete_after=func.now() + timedelta(milliseconds=max(0, grace_ms)),
                    updated_at=func.now(),
                )
            )
            n = conn.execute(
                update(cold_files)
                .where(cold_files.c.id.in_(new_ids), cold_files.c.state.in_(new_states))
                .values(state="committed", delta_version=delta_version, updated_at=func.now())
            ).rowcount
            if n != len(new_ids):
                raise SwapConflictError(f"rewritten files {new_ids} are not all {new_states}")

    def key_states(self, tp: TopicIdPartition, object_keys: list[str]) -> dict[str, str]:
        """The state of the row naming each of `object_keys` (keys no row names are absent)."""
        if not object_keys:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(cold_files.c.object_key, cold_files.c.state).where(
                    of_partition(cold_files, tp), cold_files.c.object_key.in_(object_keys)
                )
            ).all()
        return {r.object_key: r.state for r in rows}

    def staged_rewrites(self, tp: TopicIdPartition) -> list[ColdFile]:
        """Rows of rewrites that never reached their swap (a crash, or a failed commit)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(cold_files).where(
                    of_partition(cold_files, tp),
                    cold_files.c.state.in_(("copy_started", "copied")),
                    cold_files.c.object_key.contains(MERGED_MARK)
                    | cold_files.c.object_key.contains(COMPACTED_MARK)
                    | cold_files.c.object_key.contains(ERASED_MARK),
                )
            ).all()
        return [cold_file(r) for r in rows]

    def committed_within(
        self, tp: TopicIdPartition, base_offset: int, last_offset: int
    ) -> list[ColdFile]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(cold_files)
                .where(
                    of_partition(cold_files, tp),
                    cold_files.c.state == "committed",
                    and_(
                        cold_files.c.base_offset >= base_offset,
                        cold_files.c.last_offset <= last_offset,
                    ),
                )
                .order_by(cold_files.c.base_offset)
            ).all()
        return [cold_file(r) for r in rows]

    def due_deletes(self, limit: int = 1000) -> list[ColdFile]:
        """delete_started rows whose grace period is over, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(cold_files)
                .where(
                    cold_files.c.state == "delete_started",
                    cold_files.c.delete_after.is_not(None),
                    cold_files.c.delete_after <= func.now(),
                )
                .order_by(cold_files.c.delete_after, cold_files.c.id)
                .limit(limit)
            ).all()
        return [cold_file(r) for r in rows]

    def pending_delete_bytes(self) -> int:
        with self.engine.connect() as conn:
            n = conn.execute(
                select(func.coalesce(func.sum(cold_files.c.size_bytes), 0)).where(
                    cold_files.c.state == "delete_started"
                )
            ).scalar()
        return int(n or 0)
