"""What a tiering batch reports of its segments, beside their steps: the log context of a
claim, a Parquet file's figures, and the records tiered with a clamped timestamp or without a
typed value (one line per file and a metric each, never a segment retried forever)."""

from __future__ import annotations

import logging

from coldstore.parquet_writer import ParquetFile
from metadata.segment_registry import SegmentClaim
from tiering import metrics
from tiering.typed_columns import TypedColumns

log = logging.getLogger("tiering.batch")


def report_untyped(claim: SegmentClaim, extra: TypedColumns) -> None:
    """Records tiered with no typed value (the reason in their value_error column)."""
    for reason, n in extra.reasons.items():
        metrics.UNTYPED_RECORDS.labels(claim.topic, reason).inc(n)
    log.warning(
        "records tiered without a typed value: see their value_error column",
        extra={
            **claim_context(claim),
            "reasons": dict(extra.reasons),
            "refused": extra.plan.refused if extra.plan is not None else {},
        },
    )


def report_clamped(claim: SegmentClaim, parquet: ParquetFile) -> None:
    """One line per file and a metric: records tiered with their timestamp clamped (the
    policy of coldstore/timestamp_policy.py), rather than a segment retried forever."""
    first = parquet.clamped[0]
    metrics.BAD_RECORDS.labels(claim.topic, "timestamp_out_of_range").inc(len(parquet.clamped))
    log.warning(
        "records with a timestamp the cold tier cannot hold were tiered with it clamped "
        "(the original is in their tierlog.original.timestamp header)",
        extra={
            **claim_context(claim),
            "records": len(parquet.clamped),
            "first_offset": first.offset,
            "first_timestamp_ms": first.original_ms,
        },
    )


def claim_context(claim: SegmentClaim) -> dict[str, object]:
    return {
        "worker": claim.worker_id,
        "topic": claim.topic,
        "partition": claim.partition,
        "base_offset": claim.base_offset,
        "end_offset": claim.end_offset,
        "attempt": claim.attempt,
    }


def parquet_stats(p: ParquetFile) -> dict[str, int]:
    return {"records": p.records, "bytes": p.size_bytes, "row_groups": p.row_groups}
