"""The compaction worker (`tierlog compaction`): retention, small-file merge and key
compaction of every partition's cold files, then the sweep that deletes removed objects once
their grace period is over, and the tables of deleted topics (docs/design.md §1, §2, §4).

Each pass visits every partition under its Postgres advisory lock (so any number of workers
can run: they skip the partitions another one holds) and does, in order:

    recover staged rewrites → retention (cleanup.policy has delete)
        → key compaction (cleanup.policy has compact) or small-file merge (delete only)

Merges and key compaction are skipped while a tiering claim on the partition is live. They
could not conflict anyway — tiering only ever adds the file above the committed cold range,
rewrites only touch committed files below it, and Delta never sees two commits removing the
same file — but keeping out of the way leaves the tiering worker's post-commit lookup (which
file covers my segment?) trivially correct, and costs only a poll interval.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import NamedTuple

from sqlalchemy.engine import Engine

from cluster.duty import FailurePolicy
from cluster.wakeups import Wakeups
from cluster.worker_health import Health
from coldstore.object_store import ObjectStoreConfig
from compaction import metrics
from compaction.erasure_job import ColdErasure
from compaction.jobs import PartitionJobs, Settings
from compaction.manifest_ops import CompactionManifest
from compaction.stale_uploads import StaleUploads
from compaction.target import Target
from compaction.topic_purge import TopicPurge
from failures.logged import log_failure
from metadata.configs import topic_config
from metadata.erasures import ERASURE_WORK_CHANNEL, ErasureRepo
from metadata.topics import TopicRepo

log = logging.getLogger("tierlog.compaction")


class PassSummary(NamedTuple):
    partitions: int
    expired_files: int
    merged_files: int
    compacted_partitions: int
    deleted_objects: int
    reclaimed_bytes: int
    purged_topics: int = 0  # deleted topics whose table went (compaction/topic_purge.py)
    aborted_uploads: int = 0  # abandoned multipart uploads (compaction/stale_uploads.py)


class CompactionWorker:
    def __init__(
        self,
        engine: Engine,
        store_config: ObjectStoreConfig,
        worker_id: str,
        settings: Settings | None = None,
    ) -> None:
        self.engine, self.worker_id = engine, worker_id
        self.ops = CompactionManifest(engine)
        self.jobs = PartitionJobs(self.ops, store_config, settings or Settings())
        self.topics = TopicRepo(engine)
        s = settings or Settings()
        self.purge = TopicPurge(engine, self.jobs.store, store_config, s.min_grace_ms)
        self.erasure = ColdErasure(self.jobs, ErasureRepo(engine))
        self.uploads = StaleUploads(
            self.jobs.store, store_config, s.stale_upload_ms, s.upload_check_s
        )

    def close(self) -> None:
        self.jobs.close()

    def run_forever(
        self, poll_ms: int, stop_event: threading.Event, health: Health | None = None
    ) -> None:
        log.info("compaction worker started", extra={"worker": self.worker_id})
        # Postgres or S3 away: back off until they are back, deaf to wakeups meanwhile; a
        # bug: its traceback, counted.
        policy = FailurePolicy("compaction", poll_ms / 1000, context={"worker": self.worker_id})
        # A replica's finished hot erasure pass may make a cold pass due: pass at once rather
        # than up to poll_ms later (retention and merges are due by the clock: the timer).
        wakeups = Wakeups(self.engine, ERASURE_WORK_CHANNEL)
        wakeups.start()
        try:
            while not stop_event.is_set():
                wakeups.clear()
                try:
                    self.run_once()
                    policy.succeeded()
                except Exception as exc:  # the policy tells an outage from a bug
                    policy.failed(exc)
                    metrics.FAILURES.labels("loop").inc()
                if health is not None:
                    health.beat()
                wakeups.wait(policy.next_delay(), stop_event, notified=not policy.outages)
        finally:
            wakeups.stop()
        log.info("compaction worker stopped", extra={"worker": self.worker_id})

    def run_once(self, now_ms: int | None = None) -> PassSummary:
        """One pass over every partition, then the sweep. `now_ms` is for tests."""
        started = time.monotonic()
        visited = expired = merged = compacted = 0
        self._refresh_erasures()
        for info in self.topics.list():
            cfg = topic_config(info.configs)
            for p in range(info.partition_count):
                t = Target(info.id, info.name, p, cfg)
                with self.ops.partition_lock(t.tp) as mine:
                    if not mine:
                        continue  # another worker is on it
                    visited += 1
                    e, m, c = self._partition(t, now_ms)
                    expired, merged, compacted = expired + e, merged + m, compacted + c
        deleted, reclaimed = self._sweep()
        purged, purged_objects, purged_bytes = self._purge_deleted_topics()
        aborted = self._abort_stale_uploads()
        metrics.PENDING_DELETE_BYTES.set(self.ops.pending_delete_bytes())
        summary = PassSummary(
            visited,
            expired,
            merged,
            compacted,
            deleted + purged_objects,
            reclaimed + purged_bytes,
            purged,
            aborted,
        )
        if expired or merged or compacted or deleted or purged or aborted:
            log.info(
                "compaction pass",
                extra={
                    "worker": self.worker_id,
                    **summary._asdict(),
                    "seconds": round(time.monotonic() - started, 3),
                },
            )
        return summary

    def _partition(self, t: Target, now_ms: int | None) -> tuple[int, int, int]:
        ctx = {"worker": self.worker_id, "topic": t.topic, "partition": t.partition}
        expired = merged = compacted = 0
        job = "recover"
        try:
            self.jobs.recover(t)
            job = "retention"
            now = int(time.time() * 1000) if now_ms is None else now_ms
            expired = len(self.jobs.retention(t, now))
            if self.ops.tiering_busy(t.tp):
                return expired, 0, 0
            job = "erase"  # before compaction: an erasure waits on no other job
            self.erasure.run(t)
            if t.config.compact:
                job = "compact"
                compacted = int(self.jobs.compact_keys(t, now) is not None)
            else:
                job = "merge"
                merged = sum(r.files_in for r in self.jobs.merge(t))
        except Exception as exc:
            metrics.FAILURES.labels(job).inc()
            log_failure(log, "compaction job failed", exc, {**ctx, "job": job})
        return expired, merged, compacted

    def _refresh_erasures(self) -> None:
        try:
            self.erasure.refresh()
        except Exception as exc:
            metrics.FAILURES.labels("erase").inc()
            log_failure(log, "reading erasure requests failed", exc, {"worker": self.worker_id})

    def _purge_deleted_topics(self) -> tuple[int, int, int]:
        try:
            return self.purge.run_once()
        except Exception as exc:
            metrics.FAILURES.labels("purge").inc()
            where = {"worker": self.worker_id}
            log_failure(log, "deleting a deleted topic's table failed", exc, where)
            return 0, 0, 0

    def _abort_stale_uploads(self) -> int:
        try:
            return self.uploads.run_once()
        except Exception as exc:
            metrics.FAILURES.labels("uploads").inc()
            log_failure(log, "aborting stale uploads failed", exc, {"worker": self.worker_id})
            return 0

    def _sweep(self) -> tuple[int, int]:
        files = size = 0
        try:
            while True:
                n, b = self.jobs.sweep()
                files, size = files + n, size + b
                if n < 1000:
                    return files, size
        except Exception as exc:
            metrics.FAILURES.labels("sweep").inc()
            log_failure(log, "sweep failed", exc, {"worker": self.worker_id})
            return files, size
