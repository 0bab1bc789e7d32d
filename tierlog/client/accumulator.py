"""The producer's record accumulator: per-partition queues of batches awaiting the sender.

User threads append; the sender (on the I/O loop) takes batches that are ready: full
(batch_size bytes), older than linger_ms, or wanted now by flush() / close(), or by a caller
blocking on a record's future: a thread that waits adds nothing more to what is queued, so
lingering would only delay it (the closed loop "send 1,000, wait for them" pays no linger).
Unacknowledged records may use at most buffer_memory bytes; send() blocks up to max_block_ms
for room.
Each batch that closes is handed to `on_sealed` (the encoder starts building its body while
earlier batches are in flight).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from tierlog.client.batch import ProducerBatch, record_size
from tierlog.client.delivery import RecordFuture
from tierlog.client.errors import ClientClosedError, ClientTimeoutError
from tierlog.client.types import Header, TopicPartition


class RecordAccumulator:
    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: float,
        buffer_memory: int,
        delivery_timeout_ms: int,
        on_batch_closed: Callable[[TopicPartition], None],
        wake_sender: Callable[[], None],
        on_sealed: Callable[[ProducerBatch], None] | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.buffer_memory = buffer_memory
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self._on_batch_closed = on_batch_closed
        self._wake = wake_sender
        self._on_sealed = on_sealed
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._used = 0
        self._flushing = 0
        self._turn = 0  # which partition goes first in ready()'s rounds
        self._hurry_before = float("-inf")  # batches created up to then linger no more
        self.closed = False

    def append(
        self,
        tp: TopicPartition,
        key: bytes | None,
        value: bytes | None,
        headers: list[Header] | None,
        timestamp: int,
        max_block_s: float,
        size: int | None = None,
    ) -> RecordFuture:
        """Add a record to its partition's open batch (a new one if it is full or closed);
        `size`: its record_size(), if the caller has it already."""
        if size is None:
            size = record_size(key, value, headers)
        closed_tp = wake = False
        sealed: list[ProducerBatch] = []
        with self._lock:
            if self._used + size > self.buffer_memory and self._used:
                self._wait_for_room(size, max_block_s)
            if self.closed:
                raise ClientClosedError("producer")
            queue = self._queues.get(tp)
            if queue is None:
                queue = self._queues[tp] = deque()
            batch = queue[-1] if queue else None
            index = (
                batch.try_append(key, value, headers, timestamp, size, self.batch_size)
                if batch is not None
                else -1
            )
            if batch is None or index < 0:
                if batch is not None and not batch.closed:
                    batch.closed = closed_tp = True
                    sealed.append(batch)
                batch = self._new_batch(tp, queue)
                index = batch.try_append(key, value, headers, timestamp, size, self.batch_size)
                wake = True  # a new batch starts its linger timer
            self._used += size
            if batch.size >= self.batch_size:
                batch.closed = closed_tp = wake = True
                sealed.append(batch)
        if closed_tp:
            self._on_batch_closed(tp)
            self._seal(sealed)
        if wake:
            self._wake()
        return RecordFuture(batch, index)

    def append_framed(self, batch: ProducerBatch, max_block_s: float, carry_up_to: int = 0) -> None:
        """Queue a bulk batch, framed already and closed, behind its partition's records. If
        the partition's last queued batch is a bulk batch still waiting, `batch` rides in its
        request when both fit in `carry_up_to` bytes: one large request, not several small."""
        closed_tp = False
        sealed: list[ProducerBatch] = []
        with self._lock:
            if self._used + batch.size > self.buffer_memory and self._used:
                self._wait_for_room(batch.size, max_block_s)
            if self.closed:
                raise ClientClosedError("producer")
            queue = self._queues.setdefault(batch.tp, deque())
            tail = queue[-1] if queue else None
            if tail is not None and not tail.closed:
                tail.closed = closed_tp = True  # send() records before it go first
                sealed.append(tail)
            batch.closed = True
            batch.deadline = time.monotonic() + self.delivery_timeout_s
            self._incomplete.add(batch)
            self._used += batch.size
            if tail is not None and tail.can_carry(batch, carry_up_to):
                tail.riders.append(batch)
            else:
                if tail is not None and tail.arrow is not None:
                    sealed.append(tail)  # takes no more riders: its body can be built now
                queue.append(batch)  # its body is built once it is sent or followed
        if closed_tp:
            self._on_batch_closed(batch.tp)
        self._seal(sealed)
        self._wake()

    def _seal(self, batches: list[ProducerBatch]) -> None:
        if self._on_sealed is not None:
            for batch in batches:
                self._on_sealed(batch)

    def _new_batch(self, tp: TopicPartition, queue: deque[ProducerBatch]) -> ProducerBatch:
        batch = ProducerBatch(tp, deadline=time.monotonic() + self.delivery_timeout_s)
        batch.on_wait = self._expedite
        queue.append(batch)
        self._incomplete.add(batch)
        return batch

    def _expedite(self, batch: ProducerBatch) -> None:
        """A caller blocks on a record of `batch`: every batch queued now goes without
        lingering (one wake-up for all the futures of the same round)."""
        with self._lock:
            if batch.created <= self._hurry_before:
                return
            self._hurry_before = time.monotonic()
        self._wake()

    def _wait_for_room(self, size: int, max_block_s: float) -> None:
        """Block (holding the condition's lock) until `size` bytes fit in buffer_memory."""
        deadline = time.monotonic() + max_block_s
        while self._used and self._used + size > self.buffer_memory and not self.closed:
            left = deadline - time.monotonic()
            if left <= 0 or not self._space.wait(left):
                raise ClientTimeoutError(
                    f"no room in buffer_memory ({self.buffer_memory} B) "
                    f"within max_block_ms ({max_block_s * 1000:.0f} ms)"
                )

    def ready(self, now: float, admit: Callable[[ProducerBatch], bool]) -> list[ProducerBatch]:
        """Take the batches to send now, oldest first per partition. `admit(batch)` is asked
        for each ready head in turn and takes it (True) or leaves its partition (False).
        Partitions take turns, one batch each per round, starting one further on each call:
        partitions sharing a leader's in-flight requests all keep their pipelines going."""
        out: list[ProducerBatch] = []
        lingered: list[TopicPartition] = []
        with self._lock:
            hurry = self._flushing > 0 or self.closed
            hurried = self._hurry_before
            active = [(tp, q) for tp, q in self._queues.items() if q]
            if active:
                first = self._turn % len(active)
                self._turn += 1
                active = active[first:] + active[:first]
            while active:
                taken = []
                for tp, queue in active:
                    head = queue[0]
                    if not (
                        head.closed
                        or hurry
                        or head.created <= hurried
                        or now - head.created >= self.linger_s
                    ):
                        continue
                    if not admit(head):
                        continue
                    if not head.closed:
                        head.closed = True
                        lingered.append(tp)
                    out.append(queue.popleft())
                    if queue:
                        taken.append((tp, queue))
                active = taken
        for tp in lingered:
            self._on_batch_closed(tp)
        return out

    def next_linger_expiry(self) -> float | None:
        """When the oldest still-open batch becomes ready by lingering (monotonic time)."""
        with self._lock:
            heads = [q[0].created for q in self._queues.values() if q and not q[0].closed]
        return min(heads) + self.linger_s if heads else None

    def next_deadline(self) -> float | None:
        """When the first queued batch expires (delivery_timeout_ms)."""
        with self._lock:
            heads = [q[0].deadline for q in self._queues.values() if q]
        return min(heads) if heads else None

    def expired(self, now: float) -> list[ProducerBatch]:
        """Remove and return queued (never sent) batches past their delivery deadline."""
        out: list[ProducerBatch] = []
        with self._lock:
            for queue in self._queues.values():
                while queue and queue[0].deadline <= now:
                    out.append(queue.popleft())
        return out

    def drain_all(self) -> list[ProducerBatch]:
        """Remove every queued batch (closing without delivering)."""
        with self._lock:
            out = [b for q in self._queues.values() for b in q]
            for q in self._queues.values():
                q.clear()
        return out

    def release(self, batch: ProducerBatch) -> None:
        """`batch` is finished (acknowledged or failed): its bytes (and its riders') are
        free again."""
        with self._lock:
            for one in (batch, *batch.riders):
                if one in self._incomplete:
                    self._incomplete.discard(one)
                    self._used -= one.size
            self._space.notify_all()

    def incomplete(self) -> list[ProducerBatch]:
        with self._lock:
            return list(self._incomplete)

    def queued_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return [tp for tp, q in self._queues.items() if q]

    def begin_flush(self) -> None:
        with self._lock:
            self._flushing += 1
        self._wake()

    def end_flush(self) -> None:
        with self._lock:
            self._flushing -= 1

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._space.notify_all()
        self._wake()
