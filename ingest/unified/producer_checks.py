"""Validating one idempotent batch against a producer's entry (Kafka's ProducerAppendInfo
checks): pure, shared by the committed state and one drain's staging overlay."""

from __future__ import annotations

from ingest.unified.producer_types import (
    APPEND,
    MAX_EPOCH,
    MAX_SEQUENCE,
    ProducerEntry,
    Verdict,
    add_seq,
)
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import NO_PRODUCER_ID


def check_batch(
    e: ProducerEntry | None,
    pid: int,
    epoch: int,
    seq: int,
    count: int,
    *,
    start: int = -1,
    strict_unknown: bool = False,
) -> Verdict:
    """APPEND, a DUPLICATE verdict, or a TierlogError for a batch of producer `pid` whose
    entry is `e`. `start`: the first offset of the caller's drain, whose batches are in
    flight (-1 outside a drain). `strict_unknown`: refuse an unknown producer's non-zero
    first sequence (Kafka before 2.5)."""
    if pid == NO_PRODUCER_ID:
        return APPEND
    if pid < 0 or not 0 <= epoch <= MAX_EPOCH or not 0 <= seq <= MAX_SEQUENCE or count < 1:
        raise TierlogError(
            ErrorCode.INVALID_RECORD,
            f"bad idempotence fields: producer id {pid}, epoch {epoch}, sequence {seq}, "
            f"{count} records",
        )
    if e is None:
        if strict_unknown and seq != 0:
            raise TierlogError(
                ErrorCode.UNKNOWN_PRODUCER_ID,
                f"no state for producer {pid}; its first batch has sequence {seq}, not 0",
            )
        return APPEND
    if epoch < e.epoch:
        raise TierlogError(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"producer {pid} epoch {epoch} is older than its current epoch {e.epoch}",
        )
    if epoch > e.epoch:
        if seq != 0:
            raise TierlogError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {pid}: new epoch {epoch} must start at sequence 0, got {seq}",
            )
        return APPEND
    return _same_epoch(e, pid, epoch, seq, count, start)


def _same_epoch(
    e: ProducerEntry, pid: int, epoch: int, seq: int, count: int, start: int
) -> Verdict:
    """A batch of the producer's current epoch: a cached duplicate, or the next sequence."""
    last = add_seq(seq, count - 1)
    for b in e.batches:
        if b.first_seq == seq and b.last_seq == last:
            flight = 0 <= start <= b.base_offset
            return Verdict(True, b.base_offset, b.last_offset, flight)
    expected = add_seq(e.last_seq, 1) if e.batches else seq
    if seq != expected:
        raise TierlogError(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"producer {pid} epoch {epoch}: expected sequence {expected}, got {seq}",
            expected_sequence=expected,
            sequence=seq,
        )
    return APPEND
