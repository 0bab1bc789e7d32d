"""Delivery reports: what `send()` returns, without a lock or condition per record.

A batch is resolved once (its `done` event, base offset or error); a `RecordFuture` is two
slots, the batch and the record's index in it, and reads its answer from the batch, as
librdkafka's delivery reports do. It offers concurrent.futures.Future's reading methods
(`result`, `exception`, `done`, `add_done_callback`); a queued record cannot be cancelled.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from tierlog.client.types import RecordMetadata

if TYPE_CHECKING:
    from tierlog.client.batch import ProducerBatch

log = logging.getLogger("tierlog.client.producer")
# Guards batches' callback lists between user threads adding and the I/O thread resolving.
CALLBACKS_LOCK = threading.Lock()

Callback = Callable[[RecordMetadata | None, BaseException | None], object]


class RecordFuture:
    """One record's delivery: its RecordMetadata once acknowledged, or the error."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
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
        if not batch.done.wait(timeout):
            raise TimeoutError(f"the record was not acknowledged within {timeout}s")
        if batch.error is not None:
            raise batch.error
        return batch.metadata(self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        batch = self._batch
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
