"""The vocabulary of idempotent-producer state: per-producer entries, batch metadata, verdicts."""

from __future__ import annotations

from typing import NamedTuple

MAX_SEQUENCE = (1 << 31) - 1
MAX_EPOCH = (1 << 15) - 1


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


class ProducerEntry(NamedTuple):
    """Immutable, so staging overlays share entries without copying."""

    epoch: int
    batches: tuple[BatchMetadata, ...]  # oldest first
    last_timestamp: int  # max timestamp of its last batch (ms)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class Verdict(NamedTuple):
    """APPEND, or a DUPLICATE of a cached batch, answered with that batch's offsets.

    `in_flight`: the original is staged in the same drain; its offsets hold only if that
    drain's append succeeds (fail the duplicate together with the drain otherwise).
    """

    duplicate: bool = False
    base_offset: int = -1
    last_offset: int = -1
    in_flight: bool = False


APPEND = Verdict()


def add_seq(seq: int, n: int) -> int:
    """`seq + n` in Kafka's sequence space: 0 .. 2^31-1, then 0 again."""
    return (seq + n) % (MAX_SEQUENCE + 1)


def next_entry(
    e: ProducerEntry | None, epoch: int, batch: BatchMetadata, ts: int, max_batches: int
) -> ProducerEntry:
    if e is not None and e.batches and batch.base_offset <= e.batches[-1].last_offset:
        return e  # offsets only grow along the log: this one was applied already (replay)
    if e is None or epoch != e.epoch:
        return ProducerEntry(epoch, (batch,), ts)  # a new epoch forgets the old batches
    return ProducerEntry(epoch, (*e.batches, batch)[-max_batches:], ts)
