"""What to do to a partition's committed cold files: pure decisions, no I/O (unit-tested).

Files are the manifest's committed rows of one partition in offset order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from compaction.manifest_ops import COMPACTED_MARK
from metadata.types import ColdFile

LOG_START = "log_start"  # below the log start DeleteRecords set (Kafka's start breach)


class Expired(NamedTuple):
    file: ColdFile
    reason: str  # "time" (retention.ms), "size" (retention.bytes) or LOG_START


def plan_start_breach(files: Sequence[ColdFile], log_start: int | None) -> list[Expired]:
    """The files wholly below the log start DeleteRecords set (None: never set), as Kafka's
    RLMExpirationTask deletes the remote segments below the log start. A file holding the
    start stays (reads begin inside it)."""
    if log_start is None:
        return []
    out: list[Expired] = []
    for f in files:
        if f.last_offset >= log_start:
            break
        out.append(Expired(f, LOG_START))
    return out


def plan_retention(
    files: Sequence[ColdFile],
    untiered_bytes: int,
    retention_ms: int,
    retention_bytes: int,
    now_ms: int,
) -> list[Expired]:
    """The oldest files that whole-log retention removes (Kafka's RLM expiration rules).

    A file is due by time when its newest record is older than `now - retention_ms`; by size
    while removing it still leaves at least `retention_bytes` in the partition (Kafka keeps
    the log at or above retention.bytes: it deletes a segment only if `size - segment >=
    retention.bytes`), counting cold bytes plus the hot bytes not tiered yet. Removal is a
    prefix: it stops at the first file that is due for neither (-1 = unbounded)."""
    total = untiered_bytes + sum(f.size_bytes for f in files)
    out: list[Expired] = []
    for f in files:
        if retention_ms >= 0 and f.max_timestamp < now_ms - retention_ms:
            out.append(Expired(f, "time"))
        elif retention_bytes >= 0 and total - f.size_bytes >= retention_bytes:
            out.append(Expired(f, "size"))
        else:
            break
        total -= f.size_bytes
    return out


def _adjacent(a: ColdFile, b: ColdFile) -> bool:
    return b.base_offset == a.last_offset + 1


def plan_merges(
    files: Sequence[ColdFile], target_bytes: int, min_files: int = 4
) -> list[list[ColdFile]]:
    """Runs of adjacent small files to merge into files of about `target_bytes`.

    Greedy bin packing in offset order: a bin takes adjacent files smaller than the target
    while the sum stays within it. A bin is merged when it holds at least two files and
    either reaches half the target or holds `min_files` files, so a trickle of small files
    is not rewritten again and again as each new one arrives."""
    groups: list[list[ColdFile]] = []
    current: list[ColdFile] = []
    size = 0

    def close() -> None:
        if len(current) >= 2 and (2 * size >= target_bytes or len(current) >= min_files):
            groups.append(list(current))

    for f in files:
        small = f.size_bytes < target_bytes
        fits = (
            small and current and _adjacent(current[-1], f) and size + f.size_bytes <= target_bytes
        )
        if fits:
            current.append(f)
            size += f.size_bytes
            continue
        close()
        current, size = ([f], f.size_bytes) if small else ([], 0)
    close()
    return groups


def is_compacted(f: ColdFile) -> bool:
    return COMPACTED_MARK in f.object_key


class KeyCompactionPlan(NamedTuple):
    files: list[ColdFile]  # the cleanable prefix (rewritten together); empty: nothing to do
    dirty_bytes: int
    cleanable_bytes: int
    lag_ms: int  # age of the oldest record not key-compacted yet (0: none)


def plan_key_compaction(
    files: Sequence[ColdFile],
    now_ms: int,
    *,
    min_compaction_lag_ms: int,
    max_compaction_lag_ms: int,
    min_cleanable_dirty_ratio: float,
    delete_retention_ms: int,
) -> KeyCompactionPlan:
    """Whether to key-compact the partition's cold files now, and which.

    Cleanable = the prefix of files whose newest record is at least min.compaction.lag.ms
    old (newer records are never touched, like Kafka's first uncleanable offset). Dirty =
    cleanable files not written by key compaction. Compact when the dirty share reaches
    min.cleanable.dirty.ratio, when a dirty record is older than max.compaction.lag.ms, or
    when a compacted file's tombstones have all passed delete.retention.ms though some had
    not when it was written (so expired tombstones do go without new dirty data)."""
    cleanable: list[ColdFile] = []
    for f in files:
        if f.max_timestamp > now_ms - min_compaction_lag_ms:
            break
        cleanable.append(f)
    total = sum(f.size_bytes for f in cleanable)
    dirty = [f for f in cleanable if not is_compacted(f)]
    dirty_bytes = sum(f.size_bytes for f in dirty)
    lag = max((now_ms - f.min_timestamp for f in dirty), default=0)
    due = False
    if dirty and total:
        due = dirty_bytes / total >= min_cleanable_dirty_ratio or lag > max_compaction_lag_ms
    for f in cleanable:
        if is_compacted(f) and not due:
            written = int(f.created_at.timestamp() * 1000)
            if written - delete_retention_ms <= f.max_timestamp < now_ms - delete_retention_ms:
                due = True
    return KeyCompactionPlan(cleanable if due else [], dirty_bytes, total, max(0, lag))
