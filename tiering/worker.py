"""The tiering worker: sealed hot segments → Parquet → S3 → Delta → manifest (docs/design.md §2,
§4).

Segments are tiered in batches (tiering/batch.py does one batch):

    claim up to batch_segments / batch_bytes (SKIP LOCKED, leased; the lowest untiered
    segment of each partition, then the segments right after them) → per topic: download
    each from an in-sync replica (follower first) → Parquet of [base, end) while the next
    downloads and earlier files upload (manifest row copy_started → S3 put → copied) → ONE
    Delta commit of every file, with a txn per partition → committed + segments tiered in
    ONE Postgres transaction.

Crash safety: every object key is new (uuid), so an abandoned attempt never touches a file a
reader may use; its manifest rows stay copy_started/copied and are superseded by the attempt
that commits. The Delta commit is atomic (a batch's files are all visible or none) and
idempotent per partition (txn), so a worker whose lease lapsed and a worker that took over may
both commit: Delta keeps the first files, and whichever worker reaches the manifest records
*those* files (read back from the table), so manifest and Delta always agree.

Failures release the claim with the error; the registry backs the segment off exponentially,
so retries are paced by Postgres, not by a sleeping worker.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import defaultdict

from sqlalchemy.engine import Engine

from cluster.duty import FailurePolicy
from cluster.schema_lookup import StoreLookup
from cluster.wakeups import Wakeups
from cluster.worker_health import Health
from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.configs import topic_config
from metadata.registry_store import RegistryStore
from metadata.segment_registry import SEGMENTS_CHANNEL, SegmentClaim, SegmentRegistry
from metadata.topics import TopicRepo
from metadata.transactions import TxnRepo
from schemaformat.typed_decode import TYPED_MODES, TypedDecoder
from tiering import metrics
from tiering.batch import BatchSettings, tier_batch
from tiering.segment_source import SegmentSource

log = logging.getLogger(__name__)
DEFAULT_LEASE_MS = 120_000
RETRY_S = 1.0  # the first wait after an outage; doubled each time, to Backoff's cap (5 s)


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
        batch: BatchSettings | None = None,
    ) -> None:
        self.engine, self.config, self.worker_id = engine, store_config, worker_id
        self.lease_ms, self.max_segments_per_run = lease_ms, max_segments_per_run
        self.temp_dir = temp_dir
        self.row_group_bytes = row_group_bytes
        self.batch = batch or BatchSettings()
        self.registry = SegmentRegistry(engine)
        self.manifest = ColdManifest(engine)
        self.txns = TxnRepo(engine)  # tiering/txn_filter.py: committed records only
        self.store = ObjectStore(store_config)
        self._source: SegmentSource | None = None
        self._tables: dict[str, DeltaTopicTable] = {}
        self._topics = TopicRepo(engine)
        self._decoders: dict[tuple[str, str], TypedDecoder] = {}
        self.step_seconds: dict[str, float] = defaultdict(float)  # since start: bench, logs

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
        """Turns until `stop_event`: each tiers what is claimable; an idle worker then sleeps
        until woken (cluster/wakeups.py), `poll_ms` being only the safety net."""
        log.info("tiering worker started", extra={"worker": self.worker_id})
        # Postgres or S3 away: back off from RETRY_S until they are back, deaf to wakeups
        # meanwhile (each would be a failing turn); a bug: its traceback, counted. Not from
        # poll_ms: that is the idle safety net (30 s), and a backoff never waits less than
        # its period, so one failed turn left the worker deaf for the whole of it.
        policy = FailurePolicy("tiering", RETRY_S, context={"worker": self.worker_id})
        wakeups = Wakeups(self.engine, SEGMENTS_CHANNEL)
        wakeups.start()
        try:
            while not stop_event.is_set():
                wakeups.clear()
                n, due = self._turn(policy)
                if health is not None:
                    health.beat()
                if policy.outages:
                    wakeups.wait(policy.next_delay(), stop_event, notified=False)
                elif n < self.max_segments_per_run:  # drained (or a bug): sleep until woken
                    wait = poll_ms / 1000 if due is None else min(poll_ms / 1000, max(0.0, due))
                    wakeups.wait(wait, stop_event)
        finally:
            wakeups.stop()
        log.info("tiering worker stopped", extra={"worker": self.worker_id})

    def _turn(self, policy: FailurePolicy) -> tuple[int, float | None]:
        """One turn: (segments tiered, seconds until a deadline may make one claimable)."""
        try:
            n = self.run_once()
            self.update_lag_metrics()
            due = self.registry.next_due_s()
        except Exception as exc:  # the policy tells an outage from a bug
            policy.failed(exc)
            metrics.FAILURES.labels("loop").inc()
            return 0, None
        policy.succeeded()
        return n, due

    def run_once(self) -> int:
        """Tier claimable segments, a batch at a time, until none is left (or
        max_segments_per_run were claimed); returns the number tiered. A partition's next
        segment becomes claimable once the one before is tiered."""
        done = claimed = 0
        while claimed < self.max_segments_per_run:
            claims = self.registry.claim(
                self.worker_id,
                self.lease_ms,
                limit=min(self.batch.max_segments, self.max_segments_per_run - claimed),
                max_bytes=self.batch.max_bytes,
                consecutive=True,
            )
            if not claims:
                break
            claimed += len(claims)
            by_topic: dict[str, list[SegmentClaim]] = defaultdict(list)
            for c in claims:
                by_topic[c.topic_id].append(c)
            for group in by_topic.values():
                done += tier_batch(self, group)
        return done

    def update_lag_metrics(self) -> None:
        rows = self.registry.untiered()
        for gauge in (metrics.LAG_RECORDS, metrics.LAG_BYTES, metrics.LAG_SEGMENTS):
            gauge.clear()  # partitions that caught up (or topics deleted) drop out
        for r in rows:
            metrics.LAG_RECORDS.labels(r.topic, str(r.partition)).set(r.records)
            metrics.LAG_BYTES.labels(r.topic, str(r.partition)).set(r.bytes)
            metrics.LAG_SEGMENTS.labels(r.topic, str(r.partition)).set(r.segments)

    # -- used by tiering/batch.py ---------------------------------------------------------

    def table(self, claim: SegmentClaim) -> DeltaTopicTable:
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

    def typed_decoder(self, claim: SegmentClaim) -> TypedDecoder | None:
        """The decoder of a topic whose lake.mode types values (read for every batch, so a
        change takes effect from the next file); None for key_value. Cached per topic id and
        mode: it caches the schemas it has read, and an id names one schema forever."""
        info = self._topics.get(claim.topic)
        if info is None or info.id != claim.topic_id:
            return None
        mode = topic_config(info.configs).lake_mode
        if mode not in TYPED_MODES:
            return None
        key = (claim.topic_id, mode)
        decoder = self._decoders.get(key)
        if decoder is None:
            lookup = StoreLookup(RegistryStore(self.engine), claim.topic)
            decoder = self._decoders[key] = TypedDecoder(mode, lookup)
        return decoder
