"""The cold tier's share of an erasure (issue 31): rewrite only the data files of a partition
that hold a named key below the request's end offset, all in one Delta commit, and retire the
replaced objects (deleted by the sweep after the grace period).

Order with the hot tier: a partition's cold pass starts only once every replica of it has
erased its hot log, and (as every compaction job) never while a tiering claim on it is live.
So a segment tiered before the hot erasure is in the manifest when the pass reads it, and one
tiered later was copied from erased bytes: racing tiering still ends with the key gone.

Finding the files: the manifest names the candidates (committed files starting below the end
offset); a file is read only if its row-group statistics or its bloom filter on `key` cannot
rule it out (coldstore/key_filter.py); its rows are then checked for the keys themselves.
The rewrite keeps every other row at its offset and each new file covers its old file's
offset range exactly, so the manifest still tiles the partition and `recover` (which swaps
runs of staged files against the committed files they cover) finishes a crashed rewrite.
"""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from coldstore.key_filter import may_hold_keys
from coldstore.layout import data_file_relpath, table_key
from coldstore.parquet_writer import ParquetFile
from compaction import metrics
from compaction.jobs import PartitionJobs
from compaction.manifest_ops import ERASED_MARK
from compaction.rewrite import read_data_file, write_table
from compaction.target import Target
from metadata.erasures import Erasure, ErasureRepo, replica_name
from metadata.types import ColdFile, FileSpec

log = logging.getLogger("tierlog.compaction.erasure")


class Rewrite(NamedTuple):
    old: ColdFile
    rows: pa.Table  # what stays; empty when every row of the file goes
    removed: int


class ColdErasure:
    def __init__(self, jobs: PartitionJobs, repo: ErasureRepo) -> None:
        self.jobs, self.repo = jobs, repo
        self._open: list[Erasure] = []

    def refresh(self) -> None:
        """The open requests, read once per worker pass."""
        self._open = self.repo.runnable()

    def run(self, t: Target) -> int:
        """Erase the partition's cold files for the request its topic is running; returns
        the number of files rewritten. The caller holds the partition's lock."""
        e = next((e for e in self._open if e.topic_id == t.topic_id), None)
        if e is None or not t.config.remote_storage_enable:
            return 0
        if e.cold.get(str(t.partition), {}).get("done"):
            return 0
        replicas = self.repo.replicas(t.tp)
        if not replicas or not all(
            e.hot.get(replica_name(t.partition, r), {}).get("done") for r in replicas
        ):
            return 0  # the hot tier first: what tiering copies from then on is erased
        result = self.erase(t, e.id, self.repo.keys(e.id), e.end_offsets.get(str(t.partition), 0))
        self.repo.record_cold(e.id, t.topic_id, t.partition, result)
        metrics.ERASURE_COLD_RECORDS_REMOVED.labels(t.topic).inc(result["records_removed"])
        metrics.ERASURE_COLD_FILES_REWRITTEN.labels(t.topic).inc(result["files_rewritten"])
        metrics.ERASURE_COLD_BYTES_REWRITTEN.labels(t.topic).inc(result["bytes_rewritten"])
        return int(result["files_rewritten"])

    def erase(self, t: Target, erasure_id: str, keys: Sequence[bytes], end: int) -> dict[str, Any]:
        started = time.monotonic()
        files = [f for f in self.jobs.manifest.files(t.tp) if f.base_offset < end]
        key_array = pa.array(sorted(set(keys)), pa.binary())
        rewrites, read = [], 0
        for f in files:
            if not may_hold_keys(self.jobs.store, f.object_key, f.size_bytes, keys):
                continue
            read += 1
            rows = read_data_file(self.jobs.store.get(f.object_key))
            named = pc.and_(
                pc.fill_null(pc.is_in(rows.column("key"), value_set=key_array), False),
                pc.less(rows.column("offset"), end),
            )
            removed = pc.sum(named.cast(pa.int64())).as_py() or 0
            if removed:
                rewrites.append(Rewrite(f, rows.filter(pc.invert(named)), removed))
        rewrites = self._drop_already_removed(t, rewrites)
        version = self._commit(t, erasure_id, rewrites) if rewrites else None
        result = {
            "done": True,
            "files_in_range": len(files),
            "files_read": read,
            "files_rewritten": len(rewrites),
            "bytes_rewritten": sum(r.old.size_bytes for r in rewrites),
            "table_bytes": sum(f.size_bytes for f in self.jobs.manifest.files(t.tp)),
            "records_removed": sum(r.removed for r in rewrites),
            "delta_version": version,
            "seconds": round(time.monotonic() - started, 3),
            "finished_at_ms": int(time.time() * 1000),  # metadata.erasures.COLD_SETTLE_MS
        }
        log.info(
            "cold erasure done",
            extra={"topic": t.topic, "partition": t.partition, "erasure": erasure_id, **result},
        )
        return result

    def _drop_already_removed(self, t: Target, rewrites: list[Rewrite]) -> list[Rewrite]:
        """A file whose every row was erased goes without a successor; a worker killed after
        that Delta commit and before the manifest swap leaves it committed in the manifest
        but gone from the table, which `recover` (it follows staged successors) cannot see.
        Retire such files now; the rest is rewritten."""
        if not rewrites:
            return rewrites
        table = self.jobs.table(t)
        live = {f.path for f in table.files() if f.partition == t.partition}
        gone = [r for r in rewrites if table.relpath(r.old.object_key) not in live]
        if gone:
            self.jobs.ops.retire([r.old.id for r in gone], self.jobs.grace_ms(t))
            log.warning(
                "retired erased files a killed rewrite had already removed from the table",
                extra={"topic": t.topic, "partition": t.partition, "files": len(gone)},
            )
        return [r for r in rewrites if r not in gone]

    def _pause_before_commit(self, t: Target, erasure_id: str, staged: Sequence[int]) -> None:
        """The crash tests' window (compaction/settings.py ERASURE_COMMIT_PAUSE_MS, 0 = off):
        the new files are in S3 and staged in the manifest, the table still has the old ones."""
        pause_ms = self.jobs.settings.erasure_commit_pause_ms
        if pause_ms <= 0:
            return
        log.warning(
            "erasure paused before its Delta commit (crash-test setting)",
            extra={
                "topic": t.topic,
                "partition": t.partition,
                "erasure": erasure_id,
                "staged_files": len(staged),
                "pause_ms": pause_ms,
            },
        )
        time.sleep(pause_ms / 1000)

    def _commit(self, t: Target, erasure_id: str, rewrites: Sequence[Rewrite]) -> int:
        """Stage and upload every new file, then ONE Delta commit removing the old files and
        adding the new, then one Postgres swap (as PartitionJobs._rewrite, for files that
        need not be adjacent)."""
        jobs = self.jobs
        root = table_key(jobs.config, t.topic)
        staged: list[int] = []
        adds: list[tuple[ParquetFile, str]] = []
        try:
            with tempfile.TemporaryDirectory(
                prefix="tierlog-erase-", dir=jobs.settings.temp_dir
            ) as tmp:
                for i, r in enumerate(rewrites):
                    if r.rows.num_rows == 0:
                        continue  # the whole file goes: removed, nothing added
                    unique = ERASED_MARK.lstrip("-") + uuid.uuid4().hex
                    key = f"{root}/{data_file_relpath(t.partition, r.old.base_offset, unique)}"
                    pf = write_table(
                        r.rows,
                        Path(tmp) / f"{i}.parquet",
                        row_group_bytes=jobs.settings.row_group_bytes,
                    )
                    spec = FileSpec(
                        key, pf.size_bytes, pf.records, pf.min_timestamp, pf.max_timestamp
                    )
                    fid = jobs.ops.stage(t.tp, r.old.base_offset, r.old.last_offset, spec)
                    staged.append(fid)
                    jobs.store.put(key, str(pf.output))
                    jobs.manifest.mark_copied(fid)
                    adds.append((pf, key))
        except BaseException:
            jobs.manifest.start_delete(staged, 0)  # never in the table
            raise
        self._pause_before_commit(t, erasure_id, staged)
        old = [r.old for r in rewrites]
        version = jobs.table(t).replace_files(
            t.partition, [f.object_key for f in old], adds, data_change=True
        )
        jobs.ops.swap(staged, [f.id for f in old], version, jobs.grace_ms(t))
        return version
