"""Idempotent batches a leader refused before writing them, so that a batch pipelined right
behind one is refused the same way rather than answered OUT_OF_ORDER_SEQUENCE_NUMBER.

librdkafka takes OUT_OF_ORDER_SEQUENCE_NUMBER on a batch that follows one it saw refused as
"skipped sequence numbers" and bumps its producer epoch, sending again under the new epoch
every record not yet acknowledged: written ones too, which no broker can tell from new ones
(issue 26, soak seed 2611: a refused batch's successor met the error once the ISR had grown
back, and a written batch of another partition was written twice). Refused with its
predecessor's retriable error, it is retried in order after it. Only the gap the refusal
left is answered so: any other gap is still OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka answers.
"""

from __future__ import annotations

from collections.abc import Iterable

from logformat.errors import ErrorCode, TierlogError
from logformat.frame import NO_PRODUCER_ID, decode_header

# Producers remembered at most (one entry each, its last refused batch); past it, forgotten.
MAX_PRODUCERS = 10_000


class RefusedBatches:
    def __init__(self) -> None:
        # producer id -> (epoch, first sequence, the refusal) of its last refused batch
        self._last: dict[int, tuple[int, int, TierlogError]] = {}

    def note(self, frames: Iterable[bytes | bytearray], error: TierlogError) -> None:
        """`frames` were refused with `error` before any was written."""
        if len(self._last) >= MAX_PRODUCERS:
            self._last.clear()
        seen: set[int] = set()
        for frame in frames:
            h = decode_header(frame)
            if h.producer_id != NO_PRODUCER_ID and h.producer_id not in seen:
                seen.add(h.producer_id)  # the request's first batch is the one missing
                self._last[h.producer_id] = (h.producer_epoch, h.base_sequence, error)

    def explain(self, error: TierlogError, producer_id: int, epoch: int) -> TierlogError:
        """The error to answer for a batch of `producer_id` that met `error`: the refusal of
        the batch it follows, when that refused batch is the gap, else `error` itself."""
        if error.code is not ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            return error
        refused = self._last.get(producer_id)
        if refused is None or refused[:2] != (epoch, error.extra.get("expected_sequence")):
            return error
        return TierlogError(
            refused[2].code,
            f"producer {producer_id}: its batch at sequence {refused[1]} was refused "
            f"({refused[2].message}); send it again first",
        )
