"""The tiering worker: sealed hot segments → Parquet → S3 → Delta → manifest (DESIGN §2, §4).

One segment at a time, per claim:

    claim (SKIP LOCKED, leased) → download from an in-sync replica (follower first) to a temp
    file → Parquet of [base, end) → manifest row copy_started → S3 put (multipart when big) →
    copied → Delta commit (idempotent txn per topic-partition) → committed + segment tiered in
    one Postgres transaction.

Crash safety: every object key is new (uuid), so an abandoned attempt never touches a file a
reader may use; its manifest row stays copy_started/copied and is superseded by the attempt
that commits. The Delta commit is idempotent, so a worker whose lease lapsed and a worker that
took over may both commit: Delta keeps the first file, and whichever worker reaches the
manifest records *that* file (read back from the table), so manifest and Delta always agree.

Failures release the claim with the error; the registry backs the segment off exponentially,
so retries are paced by Postgres, not by a sleeping worker.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from pathlib import Path

from sqlalchemy.engine import Engine

from cluster.worker_health import Health
from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import data_file_key, table_key, table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from coldstore.parquet_writer import ParquetFile, write_parquet
from metadata.cold_manifest import ColdManifest
from metadata.segment_registry import (
    ClaimLostError,
    ColdFile,
    FileSpec,
    SegmentClaim,
    SegmentRegistry,
)
from tiering import metrics
from tiering.segment_source import SegmentSource

log = logging.getLogger(__name__)
DEFAULT_LEASE_MS = 120_000


class TieringWorker:
    """Tiers claimed segments one after another. Use one instance per thread."""

    def __init__(
        self,
        engine: Engine,
        store_config: ObjectStoreConfig,
        worker_id: str,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        max_segments_per_run: int = 64,
        temp_dir: str | os.PathLike[str] | None = None,
        row_group_bytes: int | None = None,
    ) -> None:
        self.engine, self.config, self.worker_id = engine, store_config, worker_id
        self.lease_ms, self.max_segments_per_run = lease_ms, max_segments_per_run
        self.temp_dir = temp_dir
        self.row_group_bytes = row_group_bytes
        self.registry = SegmentRegistry(engine)
        self.manifest = ColdManifest(engine)
        self.store = ObjectStore(store_config)
        self._source: SegmentSource | None = None
        self._tables: dict[str, DeltaTopicTable] = {}

    @property
    def source(self) -> SegmentSource:
        if self._source is None:  # reads the cluster secret: only once there is work
            self._source = SegmentSource(self.engine)
        return self._source

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
        self.store.close()

    # -- loop -----------------------------------------------------------------------------

    def run_forever(
        self,
        poll_ms: int,
        stop_event: threading.Event,
        health: Health | None = None,
    ) -> None:
        log.info("tiering worker started", extra={"worker": self.worker_id})
        while not stop_event.is_set():
            try:
                n = self.run_once()
                self.update_lag_metrics()
            except Exception:  # Postgres or S3 down: keep going, they come back
                log.exception("tiering loop failed", extra={"worker": self.worker_id})
                metrics.FAILURES.labels("loop").inc()
                n = 0
            if health is not None:
                health.beat()
            if n < self.max_segments_per_run:  # drained: wait for new segments
                stop_event.wait(poll_ms / 1000)
        log.info("tiering worker stopped", extra={"worker": self.worker_id})

    def run_once(self) -> int:
        """Tier claimable segments until none is left (or max_segments_per_run); returns the
        number tiered. A partition's next segment becomes claimable once this one is tiered."""
        done = 0
        for _ in range(self.max_segments_per_run):
            claims = self.registry.claim(self.worker_id, self.lease_ms, limit=1)
            if not claims:
                break
            if self.tier(claims[0]):
                done += 1
        return done

    def update_lag_metrics(self) -> None:
        rows = self.registry.untiered()
        for gauge in (metrics.LAG_RECORDS, metrics.LAG_BYTES, metrics.LAG_SEGMENTS):
            gauge.clear()  # partitions that caught up (or topics deleted) drop out
        for r in rows:
            metrics.LAG_RECORDS.labels(r.topic, str(r.partition)).set(r.records)
            metrics.LAG_BYTES.labels(r.topic, str(r.partition)).set(r.bytes)
            metrics.LAG_SEGMENTS.labels(r.topic, str(r.partition)).set(r.segments)

    # -- one segment ----------------------------------------------------------------------

    def tier(self, claim: SegmentClaim) -> bool:
        """Tier one claimed segment; on failure release the claim with the error."""
        ctx = {
            "worker": self.worker_id,
            "topic": claim.topic,
            "partition": claim.partition,
            "base_offset": claim.base_offset,
            "end_offset": claim.end_offset,
            "attempt": claim.attempt,
        }
        log.debug("segment claimed", extra={**ctx, "size_bytes": claim.size_bytes})
        started = time.monotonic()
        step = "download"
        try:
            with tempfile.TemporaryDirectory(prefix="tierlog-tiering-", dir=self.temp_dir) as tmp:
                got = self.source.download(claim, tmp)
                metrics.DOWNLOADED_BYTES.inc(got.size)
                log.debug("segment downloaded", extra={**ctx, "broker": got.broker_id})
                step = "parquet"
                parquet = self._write_parquet(claim, got.path, Path(tmp) / "data.parquet")
                got.path.unlink()  # free the disk before the upload
                step = "upload"
                self._renew(claim)
                key = data_file_key(self.config, claim.topic, claim.partition, claim.base_offset)
                ours = FileSpec(
                    key,
                    parquet.size_bytes,
                    parquet.records,
                    parquet.min_timestamp,
                    parquet.max_timestamp,
                )
                file_id = self.manifest.start_copy(claim, ours)
                self.store.put(key, str(parquet.output))
                self.manifest.mark_copied(file_id)
                log.debug("data file uploaded", extra={**ctx, "key": key, **_stats(parquet)})
            step = "delta"
            self._renew(claim)
            committed, version = self._commit_delta(claim, parquet, key)
            step = "manifest"
            orphans = self.registry.mark_tiered(claim, committed, version)
        except ClaimLostError as exc:
            # Another worker owns the segment now; it will finish (and clean up after) us.
            metrics.FAILURES.labels("claim_lost").inc()
            log.warning("claim lost", extra={**ctx, "step": step, "error": str(exc)})
            return False
        except Exception as exc:
            metrics.FAILURES.labels(step).inc()
            log.exception("tiering failed", extra={**ctx, "step": step})
            self.registry.release(claim, f"{step}: {type(exc).__name__}: {exc}")
            return False
        self._delete_orphans(orphans)
        metrics.SEGMENT_SECONDS.observe(time.monotonic() - started)
        metrics.UPLOADED_FILES.labels(claim.topic).inc()
        metrics.UPLOADED_BYTES.labels(claim.topic).inc(committed.size_bytes)
        metrics.TIERED_RECORDS.labels(claim.topic).inc(committed.records)
        log.info(
            "segment tiered",
            extra={  # the one INFO line per segment: its steps log at DEBUG
                **ctx,
                "key": committed.object_key,
                "delta_version": version,
                "records": committed.records,
                "seconds": round(time.monotonic() - started, 3),
                "superseded": len(orphans),
            },
        )
        return True

    def _write_parquet(self, claim: SegmentClaim, segment: Path, out: Path) -> ParquetFile:
        kwargs = {} if self.row_group_bytes is None else {"row_group_bytes": self.row_group_bytes}
        return write_parquet(
            segment, out, from_offset=claim.base_offset, to_offset=claim.end_offset, **kwargs
        )

    def _renew(self, claim: SegmentClaim) -> None:
        if not self.registry.extend(claim, self.lease_ms):
            raise ClaimLostError(f"{claim.topic}-{claim.partition} {claim.base_offset}")

    def _table(self, claim: SegmentClaim) -> DeltaTopicTable:
        """Cached by topic id: a topic deleted and created again under the same name is a new
        table (its old one deleted by the compaction role), never the old cached snapshot."""
        table = self._tables.get(claim.topic_id)
        if table is None:
            table = DeltaTopicTable(
                table_uri(self.config, claim.topic),
                self.config.storage_options(),
                topic=claim.topic,
            )
            table.ensure_created()
            self._tables[claim.topic_id] = table
        return table

    def _commit_delta(
        self, claim: SegmentClaim, parquet: ParquetFile, key: str
    ) -> tuple[FileSpec, int]:
        """Commit our file; return the file that the table holds for this segment (ours, or a
        lapsed attempt's that got there first) and a version at which it is visible."""
        table = self._table(claim)
        version = table.commit_file(claim.partition, parquet, key)
        root = table_key(self.config, claim.topic)
        for f in table.files():
            if (
                f.partition == claim.partition
                and f.min_offset is not None
                and f.max_offset is not None
                and f.min_offset <= parquet.base_offset <= f.max_offset
            ):
                if f.path == table.relpath(key):
                    break
                log.warning(
                    "segment was already committed by another attempt",
                    extra={"topic": claim.topic, "partition": claim.partition, "path": f.path},
                )
                return (
                    FileSpec(
                        f"{root}/{f.path}",
                        f.size,
                        f.records if f.records is not None else parquet.records,
                        f.min_timestamp if f.min_timestamp is not None else parquet.min_timestamp,
                        f.max_timestamp if f.max_timestamp is not None else parquet.max_timestamp,
                    ),
                    version,
                )
        else:
            raise RuntimeError(f"{key} is not in the Delta table after its commit")
        return (
            FileSpec(
                key,
                parquet.size_bytes,
                parquet.records,
                parquet.min_timestamp,
                parquet.max_timestamp,
            ),
            version,
        )

    def _delete_orphans(self, orphans: list[ColdFile]) -> None:
        """Objects of superseded attempts were never in the table: no reader can hold them."""
        if not orphans:
            return
        try:
            self.store.delete(o.object_key for o in orphans)
            self.manifest.mark_deleted([o.id for o in orphans])
        except Exception:  # left delete_started: retention's sweep finishes the job
            log.exception("deleting superseded data files failed")


def _stats(p: ParquetFile) -> dict[str, int]:
    return {"records": p.records, "bytes": p.size_bytes, "row_groups": p.row_groups}
