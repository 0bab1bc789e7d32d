"""The broker's erasure duty (issue 31): each replica erases the open requests' keys from its
own hot log, records its result in the request, and the request is finished once every
replica of every partition (and, for a tiered topic, the cold tier) is done.

Requests of one topic run one at a time, oldest first (ErasureRepo.runnable). A replica's
result is written only after its whole pass, and a pass over an erased log removes nothing:
a broker killed mid-pass runs it again after its restart, from Postgres' state. A follower
still below the request's end offset waits, and so does every replica until its high
watermark reaches it: frames below the high watermark are never truncated, so none can be
fetched again from a replica that has not erased yet after this replica's pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from cluster.metadata_cache import MetadataCache
from ingest import metrics
from ingest.cleaner.key_erasure import EraseResult, LogChangedError, erase_keys, key_set
from ingest.replication.partition import Partition
from metadata.erasures import (
    OPEN_STATES,
    Erasure,
    ErasureRepo,
    cold_done,
    hot_done,
    replica_name,
)
from metadata.types import TopicNamePartition

log = logging.getLogger("tierlog.erasure")

WHOLE_COUNT_EVERY_S = 60.0  # the finished requests' gauges, when nothing moved meanwhile


class ErasureDuty:
    def __init__(
        self,
        broker_id: int,
        partitions: Callable[[], Mapping[TopicNamePartition, Partition]],
        cache: MetadataCache,
        repo: ErasureRepo,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.broker_id, self._partitions, self._cache, self.repo = (
            broker_id,
            partitions,
            cache,
            repo,
        )
        self._monotonic = monotonic
        self._counts: dict[str, int] = {}  # the gauges' last values, every state
        self._whole_count_due = float("-inf")

    def run_once(self) -> int:
        """Blocking (run it in a thread). Returns the number of replica passes finished."""
        counts = self._count()
        # Nearly always nothing is open: one cheap statement a second (each broker runs
        # this every second); a request made meanwhile is seen on the next pass.
        if any(counts[s] for s in OPEN_STATES) and self.repo.fail_deleted_topics():
            counts = self._count(whole=True)
        if not any(counts[s] for s in OPEN_STATES):
            return 0
        finished = 0
        for e in self.repo.runnable():
            view = self._cache.topic(e.topic)
            if view is None or view.info.id != e.topic_id:
                continue  # not known here yet, or gone (fail_deleted_topics ends it)
            finished += self._erase_hosted(e)
            self._maybe_finish(e.id, e.topic)
        return finished

    def _count(self, *, whole: bool = False) -> dict[str, int]:
        """Requests by state, for the pass and the gauges. The open ones are counted every
        pass through the partial index of open requests; counting the finished ones scans the
        whole audit trail (~40 ms at 200,000 requests, per broker), so that runs only when the
        open counts moved (a request ended or began), or every WHOLE_COUNT_EVERY_S."""
        open_counts = self.repo.count_open()
        now = self._monotonic()
        moved = any(self._counts.get(s) != n for s, n in open_counts.items())
        if whole or moved or now >= self._whole_count_due:
            counts = self.repo.count_by_state()
            self._whole_count_due = now + WHOLE_COUNT_EVERY_S
        else:
            counts = {**self._counts, **open_counts}
        self._counts = counts
        for state, n in counts.items():
            metrics.ERASURE_REQUESTS.labels(state).set(n)
        return counts

    def _erase_hosted(self, e: Erasure) -> int:
        hosted = [s for s in self._partitions().values() if s.topic_id == e.topic_id]
        todo = [
            s
            for s in hosted
            if not e.hot.get(replica_name(s.partition, self.broker_id), {}).get("done")
        ]
        if not todo:
            return 0
        if e.state == "pending":
            self.repo.start(e.id)
        keys = key_set(self.repo.keys(e.id))
        done = 0
        for state in todo:
            end = e.end_offsets.get(str(state.partition), 0)
            if state.high_watermark < end:
                continue  # below the HW nothing is truncated and fetched again unerased
            try:
                result = erase_keys(state.log, keys, end, on_swap=self._resized(state))
            except LogChangedError as exc:
                log.info("erasure pass interrupted, retrying", extra=self._ctx(e, state, str(exc)))
                continue
            if result is None:
                continue  # this replica has not reached the end offset yet
            self._record(e, state, result)
            done += 1
        return done

    def _resized(self, state: Partition) -> Callable[[int, int, int], None]:
        def resized(base: int, end: int, size: int) -> None:
            self.repo.resize_untiered_segment(state.tp, base, end, size)

        return resized

    def _record(self, e: Erasure, state: Partition, result: EraseResult) -> None:
        name = replica_name(state.partition, self.broker_id)
        self.repo.record_hot(e.id, name, result.to_json())
        metrics.ERASURE_HOT_RECORDS_REMOVED.labels(e.topic).inc(result.records_removed)
        metrics.ERASURE_HOT_BYTES_REWRITTEN.labels(e.topic).inc(result.bytes_rewritten)
        metrics.ERASURE_HOT_SEGMENTS_REWRITTEN.labels(e.topic).inc(result.segments_rewritten)
        log.info(
            "hot erasure pass done",
            extra={**self._ctx(e, state), **result._asdict()},
        )

    def _maybe_finish(self, erasure_id: str, topic: str) -> None:
        e = self.repo.get(topic, erasure_id)
        view = self._cache.topic(topic)
        if e is None or view is None or e.state not in ("pending", "running"):
            return
        tiered = view.config.remote_storage_enable
        now_ms = int(time.time() * 1000)
        complete = hot_done(e, view.partitions) and cold_done(e, view.partitions, tiered, now_ms)
        if complete and self.repo.finish(e.id):
            log.info("erasure done", extra={"topic": topic, "erasure": e.id})

    def _ctx(self, e: Erasure, state: Partition, why: str | None = None) -> dict[str, object]:
        ctx: dict[str, object] = {
            "topic": e.topic,
            "partition": state.partition,
            "erasure": e.id,
            "broker": self.broker_id,
        }
        if why is not None:
            ctx["why"] = why
        return ctx
