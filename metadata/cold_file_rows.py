"""The cold_files table's rows as values and back (metadata/schema.py): one mapping, shared by
the segment registry, the cold manifest, compaction's manifest edits and the cold index."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Row

from metadata.schema import cold_files
from metadata.types import ColdFile, FileSpec, SegmentClaim, TopicIdPartition


def cold_file(row: Row[*tuple[Any, ...]]) -> ColdFile:
    return ColdFile(*(row._mapping[c.name] for c in cold_files.columns))


def file_values(claim: SegmentClaim, file: FileSpec) -> dict[str, Any]:
    """The cold_files columns of a claimed segment's file (it covers the whole segment)."""
    return cold_file_values(claim.tp, claim.base_offset, claim.end_offset - 1, file)


def cold_file_values(
    tp: TopicIdPartition, base_offset: int, last_offset: int, file: FileSpec
) -> dict[str, Any]:
    """The cold_files columns of a file covering offsets [base_offset, last_offset]."""
    return {
        "topic_id": tp.topic_id,
        "partition": tp.partition,
        "base_offset": base_offset,
        "last_offset": last_offset,
        "min_timestamp": file.min_timestamp,
        "max_timestamp": file.max_timestamp,
        "object_key": file.object_key,
        "size_bytes": file.size_bytes,
        "records": file.records,
    }
