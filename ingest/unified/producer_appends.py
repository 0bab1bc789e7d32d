"""One drain's staged producer-state changes, applied only when its append succeeds."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from ingest.unified.producer_checks import check_batch
from ingest.unified.producer_types import BatchMetadata, ProducerEntry, Verdict, add_seq, next_entry
from logformat.frame import NO_PRODUCER_ID

log = logging.getLogger("ingest.unified.producer_state")

_Staged = tuple[int, int, int, int, int, int | None]  # pid, epoch, seq, count, base, ts
_Mark = tuple[int, dict[int, ProducerEntry], int]  # staged count, overlay, next offset


class CommittedProducers(Protocol):
    """What a drain's overlay needs of the committed state (ProducerStateManager)."""

    max_batches: int
    strict_unknown: bool

    def entry(self, producer_id: int) -> ProducerEntry | None: ...

    def update(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        record_count: int,
        base_offset: int,
        last_offset: int,
        timestamp_ms: int | None = None,
    ) -> None: ...


class PendingAppends:
    """One drain's validation overlay (Kafka's per-append ProducerAppendInfo map).

    `check_and_stage` validates a frame against the committed state plus what this drain staged
    before it and, when it is to be appended, stages it at the offsets the log will give it
    (dense from `next_offset`, in staging order). EVERY frame the drain appends must be staged,
    plain ones too, in the order passed to LocalLog.append. `mark`/`rollback` drop a failed
    request's frames; `commit(ranges)` applies the staged frames with the offsets the log
    returned. Dropping the object discards everything: nothing is mutated before commit.
    """

    def __init__(self, manager: CommittedProducers, next_offset: int) -> None:
        self._m = manager
        self._start = self.next_offset = next_offset
        self._overlay: dict[int, ProducerEntry] = {}
        self._staged: list[_Staged] = []

    def _entry(self, pid: int) -> ProducerEntry | None:
        e = self._overlay.get(pid)
        return self._m.entry(pid) if e is None else e

    def check(
        self, producer_id: int, producer_epoch: int, base_sequence: int, record_count: int
    ) -> Verdict:
        """Like ProducerStateManager.check, including this drain's staged frames; pure."""
        e = self._entry(producer_id)
        return check_batch(
            e,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
            start=self._start,
            strict_unknown=self._m.strict_unknown,
        )

    def check_and_stage(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        record_count: int,
        timestamp_ms: int | None = None,
    ) -> Verdict:
        """check(); on APPEND also stage the frame. Raises TierlogError (nothing staged)."""
        verdict = self.check(producer_id, producer_epoch, base_sequence, record_count)
        if verdict.duplicate:
            return verdict
        base = self.next_offset
        self._staged.append(
            (producer_id, producer_epoch, base_sequence, record_count, base, timestamp_ms)
        )
        self.next_offset += record_count
        if producer_id != NO_PRODUCER_ID:
            last_seq = add_seq(base_sequence, record_count - 1)
            meta = BatchMetadata(base_sequence, last_seq, base, base + record_count - 1)
            prev = self._entry(producer_id)
            ts = -1 if timestamp_ms is None else timestamp_ms
            self._overlay[producer_id] = next_entry(
                prev, producer_epoch, meta, ts, self._m.max_batches
            )
        return verdict

    def mark(self) -> _Mark:
        return len(self._staged), dict(self._overlay), self.next_offset

    def rollback(self, mark: _Mark) -> None:
        """Unstage every frame staged since `mark` (a request that failed part-way)."""
        del self._staged[mark[0] :]
        self._overlay, self.next_offset = dict(mark[1]), mark[2]

    @property
    def staged_count(self) -> int:
        return len(self._staged)

    def commit(self, ranges: Sequence[tuple[int, int]]) -> None:
        """Apply the staged frames; `ranges` is what LocalLog.append returned for them."""
        if len(ranges) != len(self._staged):
            raise ValueError(f"{len(ranges)} appended ranges for {len(self._staged)} staged frames")
        for staged, (base, last) in zip(self._staged, ranges, strict=True):
            pid, epoch, seq, count, predicted, ts = staged
            if base != predicted:
                log.error("staged frame predicted at %d was appended at %d", predicted, base)
            self._m.update(pid, epoch, seq, count, base, last, ts)
        self._staged = []
