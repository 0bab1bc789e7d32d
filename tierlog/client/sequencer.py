"""Per-partition send state: in-flight batches, retries, and idempotent sequences.

The leader appends a producer's batches for a partition strictly in sequence order and
recognises a retried batch (same producer id, epoch and base sequence) among the last five,
answering with its original offsets (docs/design.md §1). The client side of that contract:

- a batch gets its sequence when first sent and keeps it for every retry;
- at most `max_in_flight` (1..5) batches are in flight per partition (the sender also caps
  each leader at that many requests, shared by its partitions); the first batch under
  a producer id goes alone (a leader accepts an unknown producer at any sequence, so a later
  batch overtaking the first would be taken first);
- a batch to retry goes before any new batch, alone, oldest first, so the leader sees the
  sequences in order again;
- OUT_OF_ORDER_SEQUENCE_NUMBER for a batch with an unresolved older batch is expected (HTTP
  requests on different connections may overtake one another): retry it after that one;
- a batch that fails for good leaves a hole in the sequence, so the partition takes a fresh
  producer id (Kafka's epoch bump, KIP-360) once its in-flight requests are answered; batches
  known not to be written are then re-sequenced and sent again, the others failed.

Pure bookkeeping: no I/O and no clock of its own, so it is unit-tested directly.
"""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass, field
from typing import NamedTuple

from tierlog.client.batch import ProducerBatch
from tierlog.client.errors import ApiError

MAX_SEQUENCE = 2**31 - 1
OUT_OF_ORDER = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class Decision(enum.Enum):
    RETRY = "retry"
    FAIL = "fail"
    WRITTEN = "written"  # proven written (a later batch succeeded) but the offsets are unknown


class Identity(NamedTuple):
    """One answer of POST /producers; `generation` counts them within a producer."""

    producer_id: int
    producer_epoch: int
    generation: int


NO_IDENTITY = Identity(-1, -1, -1)


def _insert(batches: list[ProducerBatch], batch: ProducerBatch) -> None:
    orders = [b.send_order for b in batches]
    batches.insert(bisect.bisect(orders, batch.send_order), batch)


@dataclass(eq=False)
class PartitionSequencer:
    max_in_flight: int
    idempotent: bool
    identity: Identity = NO_IDENTITY
    next_sequence: int = 0
    acked_upto: int = -1  # highest send order acknowledged under this identity
    needs_reset: bool = False
    inflight: list[ProducerBatch] = field(default_factory=list)  # by send order
    retries: list[ProducerBatch] = field(default_factory=list)  # by send order
    _order: int = 0

    # --- what may go out now ---
    def allowed_new(self) -> int:
        """How many new batches may be sent now."""
        if self.retries or self.needs_reset:
            return 0
        if self.idempotent and self.acked_upto < 0 and self.inflight:
            return 0  # the first batch under this producer id goes alone
        return max(0, self.max_in_flight - len(self.inflight))

    def next_retry(self, now: float) -> ProducerBatch | None:
        """The oldest batch to resend, once its backoff passed and nothing is in flight."""
        if self.needs_reset or self.inflight or not self.retries:
            return None
        head = self.retries[0]
        if head.retry_at > now:
            return None
        self.retries.pop(0)
        self._stamp(head)
        self._note_behind(head)
        _insert(self.inflight, head)
        return head

    def next_retry_time(self) -> float | None:
        if self.needs_reset or self.inflight or not self.retries:
            return None
        return self.retries[0].retry_at

    def send(self, batch: ProducerBatch) -> None:
        """A new batch goes out: stamp its producer id and sequence (kept for retries)."""
        self._stamp(batch)
        self._note_behind(batch)
        _insert(self.inflight, batch)

    def _note_behind(self, batch: ProducerBatch) -> None:
        older = self.inflight + self.retries
        batch.behind = frozenset(
            b.base_sequence for b in older if 0 <= b.send_order < batch.send_order
        )

    def _stamp(self, batch: ProducerBatch) -> None:
        if self.idempotent and batch.base_sequence < 0:
            batch.producer_id = self.identity.producer_id
            batch.producer_epoch = self.identity.producer_epoch
            batch.base_sequence = self.next_sequence
            self.next_sequence = (self.next_sequence + batch.record_count) % (MAX_SEQUENCE + 1)
        if batch.send_order < 0:
            batch.send_order = self._order
            self._order += 1

    # --- answers ---
    def on_success(self, batch: ProducerBatch) -> None:
        self._untrack(batch)
        if self._same_identity(batch):
            self.acked_upto = max(self.acked_upto, batch.send_order)

    def on_error(
        self, batch: ProducerBatch, error: ApiError, *, can_retry: bool, retry_at: float
    ) -> Decision:
        """Decide a failed attempt's fate. `can_retry`: attempts and delivery time remain."""
        self._untrack(batch)
        out_of_order = error.name == OUT_OF_ORDER
        # A later batch was appended, so this one was too. A retry still pays: the leader
        # answers a duplicate with its offsets, unless it has forgotten the batch already.
        written = self._same_identity(batch) and batch.send_order < self.acked_upto
        if self.idempotent and written and (out_of_order or not can_retry):
            return Decision.WRITTEN
        batch.unwritten = out_of_order and self._proves_unwritten(batch, error)
        # The leader wants an older batch this one overtook, answered since (a throttled or
        # retried batch and a newer one on two connections): resend after it, as above.
        overtaken = out_of_order and error.extra.get("expected_sequence") in batch.behind
        if can_retry:
            if out_of_order and (
                self._older_unresolved(batch) or overtaken or (self.needs_reset and batch.unwritten)
            ):
                self._queue_retry(batch, retry_at=0.0)  # after the older one, no backoff
                return Decision.RETRY
            if error.retriable and not out_of_order:
                self._queue_retry(batch, retry_at)
                return Decision.RETRY
        if self.idempotent and batch.base_sequence >= 0:
            self.needs_reset = True  # the sequence now has a hole the leader will not skip
        return Decision.FAIL

    # --- producer id reset ---
    def ready_to_reset(self) -> bool:
        return self.needs_reset and not self.inflight

    def reset(self, identity: Identity) -> list[ProducerBatch]:
        """Continue under a fresh producer id. Returns the waiting batches that must fail
        (perhaps written under the old id: resending them could duplicate them); the ones
        proven unwritten get new sequences and go first."""
        keep = [b for b in self.retries if b.unwritten]
        failed = [b for b in self.retries if not b.unwritten]
        self.retries = []
        self.adopt(identity)
        for b in keep:
            b.base_sequence = b.producer_id = b.producer_epoch = b.send_order = -1
            b.unwritten = False
            b.retry_at = 0.0
            self._stamp(b)  # new sequences, in their old order
            self.retries.append(b)
        return failed

    def adopt(self, identity: Identity) -> None:
        self.identity = identity
        self.next_sequence = 0
        self.acked_upto = -1
        self.needs_reset = False

    def take_retries(self) -> list[ProducerBatch]:
        """Every batch waiting for a retry (when closing without delivering)."""
        out, self.retries = self.retries, []
        return out

    @property
    def idle(self) -> bool:
        return not self.inflight and not self.retries

    # --- helpers ---
    def _same_identity(self, batch: ProducerBatch) -> bool:
        return batch.producer_id == self.identity.producer_id

    def _older_unresolved(self, batch: ProducerBatch) -> bool:
        return any(b.send_order < batch.send_order for b in self.inflight + self.retries)

    def _proves_unwritten(self, batch: ProducerBatch, error: ApiError) -> bool:
        expected = error.extra.get("expected_sequence")
        if not isinstance(expected, int):
            # The leader waits for an older batch of ours, so it did not take this one.
            return self._older_unresolved(batch)
        # The leader expects an older sequence than this batch's: it has not appended it.
        ahead = (batch.base_sequence - expected) % (MAX_SEQUENCE + 1)
        return 0 < ahead < MAX_SEQUENCE // 2

    def _queue_retry(self, batch: ProducerBatch, retry_at: float) -> None:
        batch.retry_at = retry_at
        _insert(self.retries, batch)

    def _untrack(self, batch: ProducerBatch) -> None:
        if batch in self.inflight:
            self.inflight.remove(batch)
