"""Transactions in the Delta table (issue 30): what Spark's or anyone's Delta reader sees is
committed data only. A segment is tiered only when no transaction is still open in it (the
last stable offset has passed its end: a transaction ends, by commit, abort or timeout, so
the segment waits for the next attempt), and its aborted records and markers are left out
(skipped, not marked: a Delta reader then needs no filter of its own). Kafka reads of the
cold tier leave out the same rows by the spans in Postgres, so they read the same records;
a read_uncommitted reader no longer finds aborted records there.

A segment holding nothing but aborted records and markers is tiered as its markers alone:
a file must hold a row for the partition's offsets to go on (an empty one cannot say which
offsets it covers). One of aborted records only (a long transaction's marker is in a later
segment) is tiered as one placeholder: its first record with no key, no value and the
marker header. Delta readers know those rows by their `__tierlog_txn_marker` header.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from coldstore.parquet_writer import EmptyRangeError, ParquetFile
from logformat.txn_rows import MARKER_HEADER, in_spans, marker_rows
from metadata.segment_registry import SegmentClaim
from metadata.transactions import TxnRepo

log = logging.getLogger(__name__)


class OpenTransactionError(RuntimeError):
    """The segment holds records of a transaction not ended yet: tiered once it ends."""


class SegmentTxnFilter(NamedTuple):
    """Rows kept of one segment: not a marker, not in an aborted span."""

    hidden: tuple[tuple[int, int], ...]  # [first, last] of aborted spans and markers
    keep_markers: bool = False  # the segment holds nothing else

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        markers = marker_rows(batch)
        hide = np.zeros(batch.num_rows, bool) if self.keep_markers else markers
        if self.hidden:
            hide |= in_spans(batch.column(0).to_numpy(), self.hidden) & ~markers
        return batch.filter(pa.array(~hide)) if hide.any() else batch


Keep = Callable[[pa.RecordBatch], pa.RecordBatch]


def committed_parquet(
    write: Callable[[Keep], ParquetFile], keep: SegmentTxnFilter, claim: SegmentClaim
) -> ParquetFile:
    """write(keep.apply); for a segment of aborted records and markers only, its markers."""
    try:
        return write(keep.apply)
    except EmptyRangeError:
        log.warning(
            "segment holds no committed record: tiered as its transaction markers alone",
            extra={"topic": claim.topic, "partition": claim.partition, "base": claim.base_offset},
        )
        try:
            return write(keep._replace(keep_markers=True).apply)
        except EmptyRangeError:
            return write(_Placeholder().apply)


class _Placeholder:
    """The segment's first record as a marker-like row (its data was aborted): the rest go."""

    def __init__(self) -> None:
        self.done = False

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.done or not batch.num_rows:
            return batch.slice(0, 0)
        self.done = True
        first = batch.slice(0, 1)
        headers = [[{"key": MARKER_HEADER, "value": b"aborted"}]]
        return pa.RecordBatch.from_arrays(
            [
                first.column(0),
                first.column(1),
                pa.nulls(1, first.schema.field(2).type),
                pa.nulls(1, first.schema.field(3).type),
                pa.array(headers, first.schema.field(4).type),
            ],
            schema=first.schema,
        )


def segment_filter(repo: TxnRepo, claim: SegmentClaim) -> SegmentTxnFilter:
    """The filter for the claimed segment's rows, from the partition's spans; raises
    OpenTransactionError while a transaction with records in it is open."""
    spans = repo.spans(claim.topic, claim.partition)
    open_at = [s.first_offset for s in spans if s.kind == "ongoing"]
    if open_at and min(open_at) < claim.end_offset:
        raise OpenTransactionError(
            f"{claim.topic}-{claim.partition}: a transaction open from offset {min(open_at)} "
            f"(the last stable offset) is not over; the segment ends at {claim.end_offset}"
        )
    hidden = tuple(
        (s.first_offset, s.last_offset)
        for s in spans
        if s.kind in ("aborted", "marker")
        and s.last_offset >= claim.base_offset
        and s.first_offset < claim.end_offset
    )
    return SegmentTxnFilter(hidden)
