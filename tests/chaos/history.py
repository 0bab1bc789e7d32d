"""What the chaos workload saw, recorded as it happened (thread-safe), for the checker.

Every record a producer sends has a value unique in the run, `producer|key|n` (n counts up
per producer), so the checker can tell records apart, find their producer and kind, and
check per-key order from the log alone.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

UNKNOWN_OFFSET = -1  # acknowledged without an offset (librdkafka's implicit acks)
CLIENT_LINES = 400  # the Kafka client's idempotence lines kept for a report


class Kind(Enum):
    """A producer's delivery contract, as in Kafka."""

    IDEMPOTENT_ALL = "idempotent acks=all"  # exactly once, at the acknowledged offset
    PLAIN_ALL = "plain acks=all"  # at least once: retries may duplicate, nothing acked is lost
    PLAIN_ONE = "plain acks=1"  # an acknowledged record may be lost across a leader failover


@dataclass(frozen=True)
class Ack:
    """A record the cluster acknowledged at `offset`."""

    producer: str
    kind: Kind
    partition: int
    offset: int
    key: str
    value: str
    at: float  # monotonic time of the acknowledgement


@dataclass(frozen=True)
class Read:
    """A record a consumer read (fetch serves only below the high watermark: committed)."""

    consumer: str
    partition: int
    offset: int
    key: str | None
    value: str | None
    at: float


@dataclass(frozen=True)
class EpochSeen:
    """A partition's leader epoch as describe reported it at `at`."""

    at: float
    partition: int
    epoch: int


@dataclass(frozen=True)
class Failed:
    """A record whose delivery the client gave up on (librdkafka's message timeout, say):
    never acknowledged, so it may or may not be in the log, as Kafka allows."""

    producer: str
    value: str
    sent: float  # monotonic time the client was handed it
    reason: str


@dataclass(frozen=True)
class Row:
    """One record of the final log."""

    offset: int
    key: str | None
    value: str | None


def value_of(producer: str, key: str, n: int) -> str:
    return f"{producer}|{key}|{n}"


def parse_value(value: str | None) -> tuple[str, str, int] | None:
    """(producer, key, n) of a workload value; None for anything the workload never wrote."""
    parts = (value or "").split("|")
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2])


@dataclass
class History:
    kinds: dict[str, Kind] = field(default_factory=dict)  # producer name -> kind
    acks: list[Ack] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    epochs: list[EpochSeen] = field(default_factory=list)
    failed: list[Failed] = field(default_factory=list)  # deliveries given up: unacknowledged
    # When the nemesis stopped and every broker was back (monotonic): from then on the
    # cluster must deliver what it is sent.
    healed_at: float | None = None
    unordered: set[str] = field(default_factory=set)  # producers without per-key order
    errors: list[str] = field(default_factory=list)  # a client saw what must never happen
    faults: list[str] = field(default_factory=list)  # the nemesis's steps, in order
    # The Kafka client's own account of its idempotence (librdkafka's "eos" debug lines:
    # producer ids, epoch bumps, drains), the last of them: what a duplicate is traced by.
    client_lines: deque[str] = field(default_factory=lambda: deque(maxlen=CLIENT_LINES))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def producer(self, name: str, kind: Kind) -> None:
        with self._lock:
            self.kinds[name] = kind

    def ack(self, producer: str, partition: int, offset: int, key: str, value: str) -> None:
        a = Ack(producer, self.kinds[producer], partition, offset, key, value, time.monotonic())
        with self._lock:
            self.acks.append(a)

    def read(
        self, consumer: str, partition: int, offset: int, key: str | None, value: str | None
    ) -> None:
        r = Read(consumer, partition, offset, key, value, time.monotonic())
        with self._lock:
            self.reads.append(r)

    def epoch(self, partition: int, epoch: int) -> None:
        with self._lock:
            self.epochs.append(EpochSeen(time.monotonic(), partition, epoch))

    def delivery_failed(self, producer: str, value: str, sent: float, reason: str) -> None:
        with self._lock:
            self.failed.append(Failed(producer, value, sent, reason))

    def healed(self) -> None:
        with self._lock:
            self.healed_at = time.monotonic()

    def error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)

    def fault(self, message: str) -> None:
        with self._lock:
            self.faults.append(message)

    def client_line(self, line: str) -> None:
        with self._lock:
            self.client_lines.append(line)

    def client_tail(self, lines: int = 60) -> str:
        """The last `lines` of them, as a failed run's report shows them ("" if none)."""
        with self._lock:
            kept = list(self.client_lines)[-lines:]
        if not kept:
            return ""
        head = "\n--- the Kafka producer's idempotence (librdkafka eos), last lines:\n"
        return head + "\n".join(kept)
