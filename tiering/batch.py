"""One batch of the tiering worker: the claimed segments of one topic → ONE Delta commit.

    for each segment, in claim order: download                        (a download thread)
                                       └─ Parquet                     (encoder threads)
                                           └─ manifest copy_started → S3 put → copied  (pool)
    renew the leases → one Delta commit of every uploaded file (a txn per partition; a
    partition's segments after one that failed wait for the next attempt)
    → one Postgres transaction: files committed, segments tiered → delete superseded objects

Downloads and uploads overlap the encoding: while one segment is turned into Parquet, the next
one streams in from a replica and earlier files go up to S3. pyarrow's encoder and the
sockets release the GIL, so the broker's and S3's latency hide behind the CPU work. The
download thread may run ahead by the whole batch: the batch's byte bound is the temp disk. A
segment that fails any step is released with its error and left out of the commit; the rest
go on. The commit is atomic, so a crash at any point leaves each segment of the batch either
visible once (committed: the next attempt finds its partition's txn and records the table's
file) or not at all (its objects are orphans the next attempt supersedes).
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from coldstore.layout import data_file_key
from coldstore.parquet_writer import ParquetFile, write_parquet
from failures.logged import log_failure
from metadata.segment_registry import ClaimLostError, ColdFile, FileSpec, SegmentClaim
from tiering import metrics
from tiering.batch_commit import commit_batch
from tiering.batch_reports import claim_context, parquet_stats, report_clamped, report_untyped
from tiering.batch_types import BatchHost, Typing, Uploaded
from tiering.batch_types import BatchSettings as BatchSettings  # its callers import it here
from tiering.segment_source import Downloaded
from tiering.txn_filter import committed_parquet, segment_filter
from tiering.typed_columns import TYPED, BatchTypes, TypedColumns, typed_parquet

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)
T = TypeVar("T")
_TIMES_LOCK = threading.Lock()


class _StepError(Exception):
    """A step on another thread failed: the caller releases the claim, naming the step."""

    def __init__(self, step: str, error: Exception) -> None:
        super().__init__(f"{step}: {error}")
        self.step, self.error = step, error


def _typing(worker: BatchHost, claim: SegmentClaim) -> Typing | None:
    decoder = worker.typed_decoder(claim)
    if decoder is None:
        return None
    return Typing(decoder, BatchTypes(worker.table(claim).column_type(TYPED)))


def tier_batch(worker: BatchHost, claims: list[SegmentClaim]) -> int:
    """Tier the claimed segments of one topic in one Delta commit; returns how many are
    tiered. A failure releases the segments it concerns, never the whole worker loop."""
    started = time.monotonic()
    try:
        typing = _typing(worker, claims[0])
    except Exception as exc:  # Postgres or S3 down: the segments wait for the next attempt
        _release_all(worker, claims, "typed columns", exc)
        return 0
    with (
        tempfile.TemporaryDirectory(prefix="tierlog-tiering-", dir=worker.temp_dir) as tmp,
        ThreadPoolExecutor(1, "tiering-download") as fetcher,
        ThreadPoolExecutor(worker.batch.encode_threads, "tiering-encode") as encoder,
        ThreadPoolExecutor(worker.batch.upload_threads, "tiering-upload") as pool,
    ):
        encoded = []
        for i, claim in enumerate(claims):
            got = fetcher.submit(_download, worker, claim, Path(tmp) / str(i))
            encoded.append((claim, encoder.submit(_encode, worker, claim, got, typing)))
        pending: list[tuple[SegmentClaim, Future[Uploaded]]] = []
        for claim, fut in encoded:
            parquet = _wait(worker, claim, fut, "waiting for encoding", "parquet")
            if parquet is not None:
                pending.append((claim, pool.submit(_upload, worker, claim, parquet)))
        uploaded = [
            u
            for c, f in pending
            if (u := _wait(worker, c, f, "waiting for uploads", "upload")) is not None
        ]
    live = _in_order(worker, claims, [u for u in uploaded if _renewed(worker, u.claim)])
    if not live:
        return 0
    try:
        done, version = _timed(worker, "Delta commit", lambda: commit_batch(worker, live, typing))
    except Exception as exc:
        _release_all(worker, [u.claim for u in live], "delta", exc)
        return 0
    try:
        orphans, lost = _timed(
            worker, "manifest commit", lambda: worker.registry.mark_all_tiered(done, version)
        )
    except Exception as exc:
        _release_all(worker, [u.claim for u in live], "manifest", exc)
        return 0
    _delete_orphans(worker, orphans)
    _account(worker, done, lost, version, started)
    return len(done) - len(lost)


# -- the steps of one segment ----------------------------------------------------------------


def _download(worker: BatchHost, claim: SegmentClaim, tmp: Path) -> Downloaded:
    """On the download thread: the segment, from an in-sync replica, into `tmp`."""
    log.debug("segment claimed", extra={**claim_context(claim), "size_bytes": claim.size_bytes})
    t0 = time.perf_counter()
    tmp.mkdir()
    try:
        got = worker.source.download(claim, str(tmp))
    except Exception as exc:
        raise _StepError("download", exc) from exc
    _add_time(worker, "download (on its thread)", time.perf_counter() - t0)
    metrics.DOWNLOADED_BYTES.inc(got.size)
    log.debug("segment downloaded", extra={**claim_context(claim), "broker": got.broker_id})
    return got


def _encode(
    worker: BatchHost, claim: SegmentClaim, download: Future[Downloaded], typing: Typing | None
) -> ParquetFile:
    """On an encoder thread: the segment's Parquet file, beside its copy (then deleted)."""
    got = download.result()  # a failed download raises its _StepError
    try:  # checked after the download: a transaction open then cannot reach the segment
        keep = segment_filter(worker.txns, claim)
    except Exception as exc:
        raise _StepError("transactions", exc) from exc
    t0 = time.perf_counter()
    kwargs = {} if worker.row_group_bytes is None else {"row_group_bytes": worker.row_group_bytes}
    extra: TypedColumns | None = None

    def write(columns: TypedColumns | None) -> ParquetFile:
        return committed_parquet(
            lambda k: write_parquet(
                got.path,
                got.path.parent / "data.parquet",
                from_offset=claim.base_offset,
                to_offset=claim.end_offset,
                extra=columns,
                keep=k,
                **kwargs,
            ),
            keep,
            claim,
        )

    try:
        if typing is None:
            parquet = write(None)
        else:
            parquet, extra = typed_parquet(write, typing.decoder, typing.types)
    except Exception as exc:
        raise _StepError("parquet", exc) from exc
    finally:
        _add_time(worker, "parquet (on its threads)", time.perf_counter() - t0)
    got.path.unlink()  # free the disk before the upload
    if parquet.clamped:
        report_clamped(claim, parquet)
    if extra is not None and extra.reasons:
        report_untyped(claim, extra)
    return parquet


def _upload(worker: BatchHost, claim: SegmentClaim, parquet: ParquetFile) -> Uploaded:
    """On an upload thread: manifest row copy_started → S3 put → copied."""
    t0 = time.perf_counter()
    if not worker.registry.extend(claim, worker.lease_ms):  # a long batch: keep the claim
        raise ClaimLostError(f"{claim.topic}-{claim.partition} {claim.base_offset}")
    key = data_file_key(worker.config, claim.topic, claim.partition, claim.base_offset)
    ours = FileSpec(
        key, parquet.size_bytes, parquet.records, parquet.min_timestamp, parquet.max_timestamp
    )
    file_id = worker.manifest.start_copy(claim, ours)
    worker.store.put(key, str(parquet.output))
    worker.manifest.mark_copied(file_id)
    Path(str(parquet.output)).unlink()
    log.debug(
        "data file uploaded", extra={**claim_context(claim), "key": key, **parquet_stats(parquet)}
    )
    _add_time(worker, "S3 upload (on its threads)", time.perf_counter() - t0)
    return Uploaded(claim, parquet, ours)


def _wait(
    worker: BatchHost, claim: SegmentClaim, fut: Future[T], waiting: str, step: str
) -> T | None:
    """The result of a download or upload; None (the claim released) if it failed. The
    time this thread waited for it is counted as `waiting`."""
    t0 = time.perf_counter()
    try:
        return fut.result()
    except _StepError as exc:
        _fail(worker, claim, exc.step, exc.error)
    except Exception as exc:
        _fail(worker, claim, step, exc)
    finally:
        _add_time(worker, waiting, time.perf_counter() - t0)
    return None


def _renewed(worker: BatchHost, claim: SegmentClaim) -> bool:
    """Renew the lease before the commit; a lost claim is left to its new owner."""
    try:
        if worker.registry.extend(claim, worker.lease_ms):
            return True
        _fail(worker, claim, "delta", ClaimLostError(f"{claim.topic}-{claim.partition}"))
    except Exception as exc:
        _fail(worker, claim, "delta", exc)
    return False


def _in_order(
    worker: BatchHost, claims: list[SegmentClaim], ready: list[Uploaded]
) -> list[Uploaded]:
    """Per partition, the ready segments up to the first that is not: a later segment must
    never enter Delta before an earlier one (the partition's txn version would pass it).
    Those after a gap are given back, with no error of their own, for the next attempt."""
    by_claim = {u.claim: u for u in ready}
    broken: set[int] = set()
    out: list[Uploaded] = []
    for claim in claims:  # a partition's segments come in offset order
        u = by_claim.get(claim)
        if u is not None and claim.partition not in broken:
            out.append(u)
            continue
        broken.add(claim.partition)
        if u is not None:
            log.info(
                "segment left for later: an earlier one of its partition failed",
                extra=claim_context(claim),
            )
            try:
                worker.registry.release(claim)
            except Exception as exc:  # the lease lapses and the segment is claimable again
                log_failure(log, "releasing a claim failed", exc, claim_context(claim))
    return out


def _fail(worker: BatchHost, claim: SegmentClaim, step: str, exc: BaseException) -> None:
    ctx = {**claim_context(claim), "step": step}
    if isinstance(exc, ClaimLostError):
        # Another worker owns the segment now; it will finish (and clean up after) us.
        metrics.FAILURES.labels("claim_lost").inc()
        log.warning("claim lost", extra={**ctx, "error": str(exc)})
        return
    metrics.FAILURES.labels(step).inc()
    log_failure(log, "tiering failed", exc, ctx)
    try:
        worker.registry.release(claim, f"{step}: {type(exc).__name__}: {exc}")
    except Exception as err:  # Postgres down: the lease lapses and the segment is claimable again
        log_failure(log, "releasing a claim failed", err, ctx)


def _release_all(worker: BatchHost, claims: list[SegmentClaim], step: str, exc: Exception) -> None:
    for claim in claims:
        _fail(worker, claim, step, exc)


def _timed(worker: BatchHost, step: str, fn: Callable[[], T]) -> T:
    t0 = time.perf_counter()
    try:
        return fn()
    finally:
        _add_time(worker, step, time.perf_counter() - t0)


def _add_time(worker: BatchHost, step: str, seconds: float) -> None:
    with _TIMES_LOCK:  # the download and upload threads add theirs too
        worker.step_seconds[step] += seconds


# -- after the commit: superseded objects, accounting ---------------------------------------


def _delete_orphans(worker: BatchHost, orphans: list[ColdFile]) -> None:
    """Objects of superseded attempts were never in the table: no reader can hold them."""
    if not orphans:
        return
    try:
        worker.store.delete(o.object_key for o in orphans)
        worker.manifest.mark_deleted([o.id for o in orphans])
    except Exception as exc:  # left delete_started: retention's sweep finishes the job
        log_failure(log, "deleting superseded data files failed", exc)


def _account(
    worker: BatchHost,
    done: list[tuple[SegmentClaim, FileSpec]],
    lost: list[SegmentClaim],
    version: int,
    started: float,
) -> None:
    seconds = time.monotonic() - started
    metrics.BATCH_SEGMENTS.observe(len(done) - len(lost))
    for claim in lost:
        _fail(worker, claim, "manifest", ClaimLostError(f"{claim.topic}-{claim.partition}"))
    for claim, f in done:
        if claim in lost:
            continue
        metrics.SEGMENT_SECONDS.observe(seconds)
        metrics.UPLOADED_FILES.labels(claim.topic).inc()
        metrics.UPLOADED_BYTES.labels(claim.topic).inc(f.size_bytes)
        metrics.TIERED_RECORDS.labels(claim.topic).inc(f.records)
        log.info(
            "segment tiered",
            extra={  # the one INFO line per segment: its steps log at DEBUG
                **claim_context(claim),
                "key": f.object_key,
                "delta_version": version,
                "records": f.records,
                "batch": len(done),
                "seconds": round(seconds, 3),
            },
        )
