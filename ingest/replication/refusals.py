"""A gap in an idempotent producer's sequences that the leader made itself is answered with a
retriable error, not OUT_OF_ORDER_SEQUENCE_NUMBER (docs/design.md §1; docs/architecture.md,
"Sequence gaps the leader made").

A client pipelines up to five requests per partition. When the leader refuses one of them
before it reaches the log (NOT_ENOUGH_REPLICAS while the ISR is below min.insync.replicas, its
lease in doubt, a hand-over under way, tiering behind, a failed log write) and the reason is
gone by the time the next one arrives, that next batch no longer continues the producer's
sequence. Kafka answers it OUT_OF_ORDER_SEQUENCE_NUMBER. librdkafka takes that as "an earlier
request failed": it drains and bumps its producer epoch, and re-sends every message not yet
acknowledged, of every partition, under the new epoch, where no broker can recognise a retry.
A write that another leader had answered NOT_LEADER_OR_FOLLOWER although it was kept (a
leadership move in the middle of an acks=all wait) is then written twice: chaos seed
1904215306, ten idempotent records duplicated on two partitions after one such bump.

So for WINDOW_S after it refused a write, the leader answers a batch that is ahead of its
producer's next sequence with the retriable NOT_ENOUGH_REPLICAS: the client retries the
refused batch and this one, in order, under the same epoch. A gap the client made itself (it
gave messages up) still gets OUT_OF_ORDER_SEQUENCE_NUMBER once the window has passed; such a
producer bumps its epoch anyway (librdkafka and Java both do), and a new epoch's first batch
has sequence 0, never a gap.
"""

from __future__ import annotations

from cluster.clock import Clock
from logformat.errors import ErrorCode, TierlogError

# Longer than a pipelined request takes to follow the one before it, even on a loaded
# broker; short enough that a client's own gap is reported soon.
WINDOW_S = 10.0
_SEQ_SPACE = 1 << 31  # sequences wrap at 2^31 - 1 → 0


def ahead(sequence: int, expected: int) -> bool:
    """Is `sequence` past `expected` (by less than half the wrapping sequence space)?"""
    return 0 < (sequence - expected) % _SEQ_SPACE < _SEQ_SPACE // 2


class RecentRefusals:
    """When the leader of one partition last refused a write before it reached the log."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._at: float | None = None

    def note(self, exc: TierlogError) -> TierlogError:
        """Remember a refusal now; returns `exc`, for `raise refusals.note(exc)`."""
        self._at = self._clock.monotonic()
        return exc

    def explain(self, exc: TierlogError) -> TierlogError:
        """`exc`, or a retriable NOT_ENOUGH_REPLICAS when it is a sequence gap that follows a
        refusal of this leader's within WINDOW_S."""
        if exc.code is not ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER or self._at is None:
            return exc
        if self._clock.monotonic() - self._at > WINDOW_S:
            return exc
        expected, got = exc.extra.get("expected_sequence"), exc.extra.get("sequence")
        if not isinstance(expected, int) or not isinstance(got, int) or not ahead(got, expected):
            return exc
        return TierlogError(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"{exc.message}: this leader refused a write moments ago (retriable), which the "
            f"producer will send again; retry so that sequence {expected} comes first",
            expected_sequence=expected,
            sequence=got,
        )
