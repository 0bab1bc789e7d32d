"""The commit of a tiering batch: one Delta commit of every uploaded file, and per segment the
file the table holds for it (ours, or that of a lapsed attempt that got there first)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from coldstore.delta_table import BatchCommit, DeltaTopicTable, PendingFile
from coldstore.layout import table_key
from metadata.segment_registry import FileSpec, SegmentClaim
from tiering.batch_reports import claim_context

if TYPE_CHECKING:
    from tiering.batch_types import BatchHost, Typing, Uploaded

log = logging.getLogger("tiering.batch")


def commit_batch(
    worker: BatchHost, live: list[Uploaded], typing: Typing | None
) -> tuple[list[tuple[SegmentClaim, FileSpec]], int]:
    """One Delta commit of every file; returns, per segment, the file that the table holds
    for it (ours, or a lapsed attempt's that got there first) and a version showing them.
    A typed table's schema first gains the columns the batch's files add."""
    table = worker.table(live[0].claim)
    if typing is not None:
        table.merge_columns(typing.types.fields())
    commit = table.commit_files(
        [PendingFile(u.claim.partition, u.parquet, u.file.object_key) for u in live]
    )
    return [(u.claim, _held(worker, table, commit, u)) for u in live], commit.version


def _held(worker: BatchHost, table: DeltaTopicTable, commit: BatchCommit, u: Uploaded) -> FileSpec:
    if all(p.object_key != u.file.object_key for p in commit.already):
        return u.file  # committed just now: no need to list the table's files
    claim = u.claim
    f = table.covering(claim.partition, claim.base_offset)
    if f is None:
        raise RuntimeError(f"{claim.topic}-{claim.partition} {claim.base_offset} left the table")
    if f.path != table.relpath(u.file.object_key):
        log.warning(
            "segment was already committed by another attempt",
            extra={**claim_context(claim), "path": f.path},
        )
    p = u.parquet
    return FileSpec(
        f"{table_key(worker.config, claim.topic)}/{f.path}",
        f.size,
        f.records if f.records is not None else p.records,
        f.min_timestamp if f.min_timestamp is not None else p.min_timestamp,
        f.max_timestamp if f.max_timestamp is not None else p.max_timestamp,
    )
