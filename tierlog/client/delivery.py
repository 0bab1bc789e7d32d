"""Delivery reports: what `send()` returns, without a lock or condition per record.

A batch is resolved once (its `done` event, base offset or error); a `RecordFuture` is two
slots, the batch and the record's index in it, and reads its answer from the batch, as
librdkafka's delivery reports do. It offers concurrent.futures.Future's reading methods
(`result`, `exception`, `done`, `add_done_callback`); a queued record cannot be cancelled.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from tierlog.client.types import RecordMetadata, TopicPartition

log = logging.getLogger("tierlog.client.producer")
# Guards batches' callback lists between user threads adding and the I/O thread resolving.
CALLBACKS_LOCK = threading.Lock()

Callback = Callable[[RecordMetadata | None, BaseException | None], object]


class Answered(Protocol):
    """What delivery reports read: a producer batch (batch.py), once answered."""

    tp: TopicPartition
    done: threading.Event
    error: BaseException | None

    def metadata(self, index: int) -> RecordMetadata: ...

    def on_done(self, fn: Callable[[], object]) -> None: ...

    def waited(self) -> None: ...


class RecordFuture:
    """One record's delivery: its RecordMetadata once acknowledged, or the error."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: Answered, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done.is_set()

    def running(self) -> bool:
        return not self._batch.done.is_set()

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        """Records already queued are sent; as with Kafka, they cannot be cancelled."""
        return False

    def result(self, timeout: float | None = None) -> RecordMetadata:
        batch = self._batch
        if not batch.done.is_set():
            batch.waited()  # someone blocks on it: what is queued now stops lingering
        if not batch.done.wait(timeout):
            raise TimeoutError(f"the record was not acknowledged within {timeout}s")
        if batch.error is not None:
            raise batch.error
        return batch.metadata(self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        batch = self._batch
        if not batch.done.is_set():
            batch.waited()
        if not batch.done.wait(timeout):
            raise TimeoutError(f"the record was not acknowledged within {timeout}s")
        return batch.error

    def add_done_callback(self, fn: Callable[[RecordFuture], object]) -> None:
        """`fn(future)` once answered: on the producer's I/O thread, or at once if done."""
        self._batch.on_done(lambda: fn(self))

    def __repr__(self) -> str:
        state = "pending" if self.running() else "done"
        return f"<RecordFuture {self._batch.tp.topic}-{self._batch.tp.partition} {state}>"


def run_callback(callback: Callback, future: RecordFuture) -> None:
    """Call a send() callback with (metadata, None) or (None, error); never raises."""
    try:
        error = future.exception()
        callback(None if error else future.result(), error)
    except Exception:
        log.exception("producer callback raised")


class BulkDelivery:
    """The delivery reports of one send_batch / send_table call, in the records' order.

    `wait()` for all, `result()` for every RecordMetadata (raising the first error), or
    `exceptions()` for the records that failed and why; `[i]` is record i's RecordFuture.
    """

    def __init__(self, batches: Sequence[Answered], starts: list[int], perm: pa.Array) -> None:
        self._batches = batches
        self._starts = starts  # sorted position of each batch's first record
        self._perm = perm  # input index of each sorted position
        self._inverse: list[int] | None = None

    def __len__(self) -> int:
        return len(self._perm)

    def __getitem__(self, index: int) -> RecordFuture:
        if self._inverse is None:
            self._inverse = pc.sort_indices(self._perm).to_pylist()
        pos = self._inverse[index]
        k = bisect.bisect_right(self._starts, pos) - 1
        return RecordFuture(self._batches[k], pos - self._starts[k])

    def __iter__(self) -> Iterator[RecordFuture]:
        return (self[i] for i in range(len(self)))

    def done(self) -> bool:
        return all(b.done.is_set() for b in self._batches)

    def add_done_callback(self, fn: Callable[[BulkDelivery], object]) -> None:
        """`fn(delivery)` once every record is answered (on the producer's I/O thread, or at
        once if they are)."""
        left = [len(self._batches)]
        lock = threading.Lock()

        def one_done() -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                fn(self)

        if not self._batches:
            fn(self)
        for batch in self._batches:
            batch.on_done(one_done)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every record is answered; False if `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for batch in self._batches:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not batch.done.wait(left):
                return False
        return True

    def exceptions(self, timeout: float | None = None) -> dict[int, BaseException]:
        """The failed records' errors by their index in the input."""
        self._wait_or_raise(timeout)
        out: dict[int, BaseException] = {}
        ends = [*self._starts[1:], len(self._perm)]
        for batch, start, end in zip(self._batches, self._starts, ends, strict=True):
            if batch.error is not None:
                for i in self._perm.slice(start, end - start).to_pylist():
                    out[i] = batch.error
        return out

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        """Every record's RecordMetadata in input order; raises the first failure."""
        self._wait_or_raise(timeout)
        for batch in self._batches:
            if batch.error is not None:
                raise batch.error
        out: list[RecordMetadata | None] = [None] * len(self._perm)
        ends = [*self._starts[1:], len(self._perm)]
        for batch, start, end in zip(self._batches, self._starts, ends, strict=True):
            indexes = self._perm.slice(start, end - start).to_pylist()
            for j, i in enumerate(indexes):
                out[i] = batch.metadata(j)
        return [m for m in out if m is not None]

    def _wait_or_raise(self, timeout: float | None) -> None:
        if not self.wait(timeout):
            raise TimeoutError(f"the records were not all acknowledged within {timeout}s")
