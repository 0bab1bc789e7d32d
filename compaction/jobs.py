"""Per-partition compaction jobs: retention, small-file merge, key compaction, crash recovery.

Every job changes the Delta table first and the manifest second, so an object the manifest
marks delete_started is never still live in the table (the sweep may delete it), and a
reader resolving offsets through committed manifest rows always finds its objects:

- retention: Delta remove (dataChange=true) → manifest committed → delete_started (+grace).
- rewrite (merge, key compaction): new files staged (copy_started) → uploaded (copied) →
  one Delta commit removing the old files and adding the new → one Postgres transaction
  retiring the old rows and committing the new. A crash between the Delta commit and the
  swap is finished by `recover`: the staged rows whose files are live in Delta are swapped
  in, whatever their state says; the others are deleted, at once if no Delta commit since
  their staging added them, else after the grace period.

The caller holds the partition's advisory lock (manifest_ops.partition_lock).
"""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa

from coldstore.delta_history import DeltaHistory
from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import data_file_relpath, table_key, table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from coldstore.parquet_writer import DEFAULT_ROW_GROUP_BYTES
from compaction import metrics
from compaction import settings as table
from compaction.manifest_ops import COMPACTED_MARK, MERGED_MARK, CompactionManifest
from compaction.plan import (
    LOG_START,
    Expired,
    plan_key_compaction,
    plan_merges,
    plan_retention,
    plan_start_breach,
)
from compaction.reconcile import retire_dropped
from compaction.rewrite import (
    concat,
    keep_mask,
    latest_offsets,
    read_data_file,
    split_by_bytes,
    write_table,
)
from compaction.target import Target
from metadata.cold_manifest import ColdManifest
from metadata.types import ColdFile, FileSpec

log = logging.getLogger("tierlog.compaction")
MiB = 1 << 20
_GET_THREADS = 8  # concurrent GETs: a rewrite's input is many small objects
_CLOCK_SKEW_MS = 60_000  # Postgres's clock (a row's created_at) against a Delta commit's


class Settings(NamedTuple):
    target_file_bytes: int = table.TARGET_FILE_BYTES.default  # compaction/settings.py
    merge_min_files: int = 4  # a bin under half the target merges once it has this many
    min_grace_ms: int = table.MIN_GRACE_MS.default  # floor under file.delete.delay.ms
    stale_upload_ms: int = table.STALE_UPLOAD_MS.default  # open uploads abandoned after
    upload_check_s: float = 600.0  # how often to list open multipart uploads
    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES
    erasure_commit_pause_ms: int = 0  # crash tests only: compaction/settings.py
    temp_dir: str | None = None


class RewriteResult(NamedTuple):
    files_in: int
    files_out: int
    bytes_in: int
    bytes_out: int
    records_in: int
    records_out: int


class PartitionJobs:
    """The jobs, over one object store; one instance per worker thread."""

    def __init__(
        self,
        engine_manifest: CompactionManifest,
        store_config: ObjectStoreConfig,
        settings: Settings,
    ) -> None:
        self.ops = engine_manifest
        self.manifest = ColdManifest(engine_manifest.engine)
        self.config, self.settings = store_config, settings
        self.store = ObjectStore(store_config)
        self._tables: dict[str, DeltaTopicTable] = {}

    def close(self) -> None:
        self.store.close()

    def table(self, t: Target) -> DeltaTopicTable:
        """The topic's table, cached by topic id: a topic deleted and created again under
        the same name is a new table, which a snapshot cached by name would not see."""
        table = self._tables.get(t.topic_id)
        if table is None:
            table = DeltaTopicTable(
                table_uri(self.config, t.topic), self.config.storage_options(), topic=t.topic
            )
            self._tables[t.topic_id] = table
        return table

    def store_root(self, t: Target) -> str:
        """The bucket key of the topic's table root (object keys are under it)."""
        return table_key(self.config, t.topic)

    def grace_ms(self, t: Target) -> int:
        return max(self.settings.min_grace_ms, t.config.file_delete_delay_ms)

    def _ctx(self, t: Target) -> dict[str, object]:
        return {"topic": t.topic, "partition": t.partition}

    # -- recovery ---------------------------------------------------------------------------

    def recover(self, t: Target) -> None:
        """Finish or undo rewrites a crash (or a failed commit) left staged.

        The table decides, never the row's state: a staged file the table holds was put in
        by the rewrite's Delta commit, even if its row still reads copy_started (the
        mark_copied before that commit can be lost with Postgres: a kill under
        synchronous_commit=off, a failover to an asynchronous standby). Deleting it would
        lose its records and leave the old rows committed for files the table dropped."""
        staged = self.ops.staged_rewrites(t.tp)
        if not staged:
            return
        table = self.table(t)
        live = {f.path for f in table.files() if f.partition == t.partition}
        done = sorted(
            (s for s in staged if table.relpath(s.object_key) in live),
            key=lambda s: s.base_offset,
        )
        undone = [s for s in staged if s not in done]
        self._drop_staged(t, undone)
        runs: list[list[ColdFile]] = []
        for s in done:  # one rewrite's files are adjacent ranges
            if runs and runs[-1][-1].last_offset + 1 == s.base_offset:
                runs[-1].append(s)
            else:
                runs.append([s])
        for run in runs:
            old = self.ops.committed_within(t.tp, run[0].base_offset, run[-1].last_offset)
            self.ops.swap(
                [s.id for s in run],
                [o.id for o in old],
                table.version(),
                self.grace_ms(t),
                new_states=("copy_started", "copied"),
            )
        log.warning(
            "recovered staged rewrites",
            extra={**self._ctx(t), "finished": len(done), "abandoned": len(undone)},
        )

    def _drop_staged(self, t: Target, undone: list[ColdFile]) -> None:
        """Staged files the table does not hold: deleted at once if no commit since their
        staging added them (no reader can hold them), else after the grace period."""
        if not undone:
            return
        table = self.table(t)
        since = min(s.created_at for s in undone).timestamp() * 1000 - _CLOCK_SKEW_MS
        added = DeltaHistory(self.store, self.store_root(t)).paths_added_since(int(since))
        was_in = [s for s in undone if added is None or table.relpath(s.object_key) in added]
        never = [s for s in undone if s not in was_in]
        if never:
            self.manifest.start_delete([s.id for s in never], 0)
        if was_in:
            self.manifest.start_delete([s.id for s in was_in], self.grace_ms(t))

    # -- retention --------------------------------------------------------------------------

    def retention(self, t: Target, now_ms: int) -> list[Expired]:
        """Remove the files wholly below the log start DeleteRecords set, then those
        whole-log retention expires (cleanup.policy with delete)."""
        cfg = t.config
        files = self.manifest.files(t.tp)
        if not files:
            return []
        expired = plan_start_breach(files, self.manifest.deleted_before(t.tp))
        if cfg.delete and (cfg.retention_ms >= 0 or cfg.retention_bytes >= 0):
            rest = files[len(expired) :]
            untiered = self.ops.untiered_bytes(t.tp) if cfg.retention_bytes >= 0 else 0
            expired += plan_retention(rest, untiered, cfg.retention_ms, cfg.retention_bytes, now_ms)
        if not expired:
            return []
        version = self.table(t).remove_files([e.file.object_key for e in expired], data_change=True)
        self.ops.retire([e.file.id for e in expired], self.grace_ms(t))
        for e in expired:
            metrics.EXPIRED_FILES.labels(t.topic, e.reason).inc()
            metrics.EXPIRED_RECORDS.labels(t.topic).inc(e.file.records)
        log.info(
            "retention removed cold files",
            extra={
                **self._ctx(t),
                "files": len(expired),
                "records": sum(e.file.records for e in expired),
                "bytes": sum(e.file.size_bytes for e in expired),
                "new_log_start": expired[-1].file.last_offset + 1,
                "by_time": sum(e.reason == "time" for e in expired),
                "by_size": sum(e.reason == "size" for e in expired),
                "by_deleted_records": sum(e.reason == LOG_START for e in expired),
                "delta_version": version,
            },
        )
        return expired

    # -- small-file merge -------------------------------------------------------------------

    def merge(self, t: Target) -> list[RewriteResult]:
        files = self.manifest.files(t.tp)
        groups = plan_merges(files, self.settings.target_file_bytes, self.settings.merge_min_files)
        out = []
        for group in groups:
            if retire_dropped(self, t, group):
                break  # the manifest changed under the plan: the next pass plans again
            blobs = self._get_all(group)
            data = concat([read_data_file(blobs[f.id]) for f in group])
            pieces = split_by_bytes(
                data, sum(f.size_bytes for f in group), self.settings.target_file_bytes
            )
            res = self._rewrite(t, group, pieces, MERGED_MARK, data_change=False, job="merge")
            metrics.MERGED_FILES.labels(t.topic).inc(res.files_in)
            metrics.MERGE_OUTPUT_FILES.labels(t.topic).inc(res.files_out)
            out.append(res)
        return out

    # -- key compaction ---------------------------------------------------------------------

    def compact_keys(self, t: Target, now_ms: int) -> RewriteResult | None:
        """Keep the latest record per key over the cleanable prefix of the cold files."""
        cfg = t.config
        files = self.manifest.files(t.tp)
        plan = plan_key_compaction(
            files,
            now_ms,
            min_compaction_lag_ms=cfg.min_compaction_lag_ms,
            max_compaction_lag_ms=cfg.max_compaction_lag_ms,
            min_cleanable_dirty_ratio=cfg.min_cleanable_dirty_ratio,
            delete_retention_ms=cfg.delete_retention_ms,
        )
        labels = (t.topic, str(t.partition))
        metrics.COMPACTION_LAG_MS.labels(*labels).set(plan.lag_ms)
        metrics.DIRTY_RATIO.labels(*labels).set(
            plan.dirty_bytes / plan.cleanable_bytes if plan.cleanable_bytes else 0.0
        )
        if not plan.files or retire_dropped(self, t, plan.files):
            return None
        # Pass 1: the latest offset of every key (keys and offsets only).
        blobs = self._get_all(plan.files)
        latest = latest_offsets(
            pa.concat_tables(read_data_file(blobs[f.id], ["offset", "key"]) for f in plan.files)
        )
        # Pass 2: each file's surviving rows.
        horizon = now_ms - cfg.delete_retention_ms
        kept, records_in = [], 0
        for f in plan.files:
            rows = read_data_file(blobs.pop(f.id))
            records_in += rows.num_rows
            kept.append(rows.filter(keep_mask(rows, latest, horizon)))
        data = concat(kept)
        size_in = sum(f.size_bytes for f in plan.files)
        metrics.COMPACTED_RECORDS_IN.labels(t.topic).inc(records_in)
        metrics.COMPACTED_RECORDS_OUT.labels(t.topic).inc(data.num_rows)
        if data.num_rows == 0:  # nothing survives: the range goes as retention would
            self.table(t).remove_files([f.object_key for f in plan.files], data_change=True)
            self.ops.retire([f.id for f in plan.files], self.grace_ms(t))
            log.info(
                "key compaction emptied the range", extra={**self._ctx(t), "files": len(plan.files)}
            )
            return RewriteResult(len(plan.files), 0, size_in, 0, records_in, 0)
        estimate = size_in * data.num_rows // max(1, records_in)
        pieces = split_by_bytes(data, estimate, self.settings.target_file_bytes)
        return self._rewrite(t, plan.files, pieces, COMPACTED_MARK, data_change=True, job="compact")

    # -- the rewrite protocol ---------------------------------------------------------------

    def _get_all(self, files: Sequence[ColdFile]) -> dict[int, bytes]:
        """The objects of `files` by row id, fetched concurrently (S3 latency dominates)."""
        with ThreadPoolExecutor(min(_GET_THREADS, max(1, len(files)))) as pool:
            data = list(pool.map(lambda f: self.store.get(f.object_key), files))
        return {f.id: d for f, d in zip(files, data, strict=True)}

    def _rewrite(
        self,
        t: Target,
        old: Sequence[ColdFile],
        pieces: Sequence[pa.Table],
        mark: str,
        *,
        data_change: bool,
        job: str,
    ) -> RewriteResult:
        """Replace the adjacent files `old` by one file per piece, covering the same range."""
        started = time.monotonic()
        first, last = old[0].base_offset, old[-1].last_offset
        starts = [first] + [int(p.column("offset")[0].as_py()) for p in pieces[1:]]
        ends = [s - 1 for s in starts[1:]] + [last]
        root = table_key(self.config, t.topic)
        table = self.table(t)
        staged: list[int] = []
        adds = []
        try:
            with tempfile.TemporaryDirectory(
                prefix="tierlog-compact-", dir=self.settings.temp_dir
            ) as tmp:
                for i, piece in enumerate(pieces):
                    unique = mark.lstrip("-") + uuid.uuid4().hex
                    key = f"{root}/{data_file_relpath(t.partition, starts[i], unique)}"
                    pf = write_table(
                        piece,
                        Path(tmp) / f"{i}.parquet",
                        row_group_bytes=self.settings.row_group_bytes,
                    )
                    spec = FileSpec(
                        key, pf.size_bytes, pf.records, pf.min_timestamp, pf.max_timestamp
                    )
                    fid = self.ops.stage(t.tp, starts[i], ends[i], spec)
                    staged.append(fid)
                    self.store.put(key, str(pf.output))
                    self.manifest.mark_copied(fid)
                    adds.append((pf, key))
        except BaseException:
            self.manifest.start_delete(staged, 0)  # never in the table
            raise
        # From here a failure leaves the staged rows to `recover` (the commit may have landed).
        version = table.replace_files(
            t.partition, [f.object_key for f in old], adds, data_change=data_change
        )
        self.ops.swap(staged, [f.id for f in old], version, self.grace_ms(t))
        res = RewriteResult(
            len(old),
            len(adds),
            sum(f.size_bytes for f in old),
            sum(pf.size_bytes for pf, _ in adds),
            sum(f.records for f in old),
            sum(pf.records for pf, _ in adds),
        )
        metrics.REWRITTEN_BYTES.labels(t.topic, job).inc(res.bytes_out)
        metrics.JOB_SECONDS.labels(job).observe(time.monotonic() - started)
        log.info(
            "cold files rewritten",
            extra={
                **self._ctx(t),
                "job": job,
                "range": f"[{first}, {last}]",
                **res._asdict(),
                "delta_version": version,
                "seconds": round(time.monotonic() - started, 3),
            },
        )
        return res

    # -- the sweep --------------------------------------------------------------------------

    def sweep(self, limit: int = 1000) -> tuple[int, int]:
        """Delete the objects of delete_started files past their grace; (files, bytes)."""
        due = self.ops.due_deletes(limit)
        if not due:
            return 0, 0
        self.store.delete(f.object_key for f in due)
        self.manifest.mark_deleted([f.id for f in due])
        size = sum(f.size_bytes for f in due)
        metrics.DELETED_OBJECTS.inc(len(due))
        metrics.RECLAIMED_BYTES.inc(size)
        log.info("removed files deleted from the bucket", extra={"files": len(due), "bytes": size})
        return len(due), size
