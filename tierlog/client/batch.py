"""A producer batch: records for one partition, sent as one Arrow IPC stream request.

The body is encoded once, when the batch is first sent, and reused for every retry, so a
retried batch is byte-identical and keeps its producer id, epoch and base sequence: the
leader recognises it and answers with the original offsets instead of writing it twice.

A bulk batch waiting for its turn may carry later bulk batches of its partition ("riders"):
they go in its request, after its records, and share its sequence range and its answer, so
small send_table calls still make requests of max_request_size.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import pyarrow as pa

from logformat.schema import HEADERS
from tierlog.client.delivery import CALLBACKS_LOCK, RecordFuture, log
from tierlog.client.types import Header, RecordMetadata, TopicPartition

# Per-record overhead of the Arrow encoding (offsets, validity, timestamp), for sizing.
RECORD_OVERHEAD = 20
_WRITE_OPTIONS = {c: pa.ipc.IpcWriteOptions(compression=c) for c in ("zstd", "lz4")}


def record_size(key: bytes | None, value: bytes | None, headers: list[Header] | None) -> int:
    size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    if headers:
        size += sum(8 + len(k) + (len(v) if v else 0) for k, v in headers)
    return size


def encode_records(
    keys: list[bytes | None],
    values: list[bytes | None],
    headers: list[list[Header] | None],
    timestamps: list[int],
    partition: int,
    compression: str | None,
) -> bytes:
    """The Arrow IPC stream of a produce request: key, value, timestamp (ms), partition and,
    when any record has them, headers; buffers compressed with zstd or lz4 if asked."""
    n = len(keys)
    columns: dict[str, pa.Array] = {
        "key": pa.nulls(n, pa.binary())
        if keys.count(None) == n
        else pa.array(keys, type=pa.binary()),
        "value": pa.array(values, type=pa.binary()),
        "timestamp": pa.array(timestamps, type=pa.int64()),
        "partition": pa.repeat(pa.scalar(partition, pa.int32()), n),
    }
    if headers.count(None) != n:
        rows = [None if hs is None else [{"key": k, "value": v} for k, v in hs] for hs in headers]
        columns["headers"] = pa.array(rows, type=HEADERS)
    return encode_batch(pa.RecordBatch.from_pydict(columns), compression)


def encode_batch(batch: pa.RecordBatch, compression: str | None) -> bytes:
    """`batch` (produce columns, framed already) as one Arrow IPC stream body."""
    sink = pa.BufferOutputStream()
    options = _WRITE_OPTIONS.get(compression) if compression else None
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_batch(batch)
    body: bytes = sink.getvalue().to_pybytes()
    return body


@dataclass(eq=False)
class ProducerBatch:
    tp: TopicPartition
    deadline: float  # monotonic time after which its records fail (delivery_timeout_ms)
    created: float = field(default_factory=time.monotonic)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[list[Header] | None] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    # A bulk batch (send_batch / send_table) arrives framed: its records are this instead.
    arrow: pa.RecordBatch | None = None
    riders: list[ProducerBatch] = field(default_factory=list)  # bulk batches it carries
    size: int = 0
    closed: bool = False  # takes no more records
    # Set when first sent, kept for every retry (idempotence).
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    body: bytes | None = None
    encoding: Future[bytes] | None = None  # the body being built (encoder.py)
    send_order: int = -1  # per partition, set when first sent (the sequencer's ordering)
    leader: str = ""  # the URL its current attempt went to (holding one of its slots)
    unwritten: bool = False  # the last answer proved the leader did not append it
    # Base sequences of older batches still unanswered when this attempt went out: if the
    # leader then wants one of those, this attempt overtook it and only needs resending.
    behind: frozenset[int] = frozenset()
    attempts: int = 0
    retry_at: float = 0.0
    # The one answer for all its records, read by their RecordFutures.
    done: threading.Event = field(default_factory=threading.Event)
    base_offset: int = -1
    error: BaseException | None = None
    callbacks: list[Callable[[], object]] | None = None
    # The accumulator's: a caller blocks on one of its records (RecordFuture.result()).
    on_wait: Callable[[ProducerBatch], None] | None = None

    @property
    def record_count(self) -> int:
        """Records in its request (its riders' too)."""
        if self.arrow is None:
            return len(self.values)
        own: int = self.arrow.num_rows
        return own + sum(r.record_count for r in self.riders)

    def can_carry(self, other: ProducerBatch, limit: int) -> bool:
        """May bulk batch `other` ride in this waiting bulk batch's request?"""
        return (
            self.arrow is not None
            and other.arrow is not None
            and self.base_sequence < 0  # never sent: its sequence range may still grow
            and self.body is None
            and self.encoding is None
            and self.size + sum(r.size for r in self.riders) + other.size <= limit
            and self.arrow.schema.equals(other.arrow.schema)
        )

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.record_count - 1

    def try_append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: list[Header] | None,
        timestamp: int,
        size: int,
        limit: int,
    ) -> int:
        """Add a record unless the batch is closed or would pass `limit` bytes (a batch
        always takes its first record, however large): its index, or -1 if not taken."""
        values = self.values
        if self.closed or (values and self.size + size > limit):
            return -1
        self.keys.append(key)
        values.append(value)
        self.headers.append(headers)
        self.timestamps.append(timestamp)
        self.size += size
        return len(values) - 1

    def encode(self, compression: str | None) -> bytes:
        if self.body is None:
            if self.arrow is not None:
                arrow = self.arrow
                if self.riders:
                    arrow = pa.concat_batches([arrow, *(r.arrow for r in self.riders if r.arrow)])
                self.body = encode_batch(arrow, compression)
            else:
                self.body = encode_records(
                    self.keys,
                    self.values,
                    self.headers,
                    self.timestamps,
                    self.tp.partition,
                    compression,
                )
        return self.body

    def metadata(self, index: int) -> RecordMetadata:
        """Record `index`'s RecordMetadata, once acknowledged: offsets are consecutive from
        the base offset (-1 when it is unknown, as with acks=0)."""
        base = self.base_offset
        if self.arrow is not None:
            ts = self.arrow.column("timestamp")[index].as_py()
        else:
            ts = self.timestamps[index]
        offset = base + index if base >= 0 else -1
        return RecordMetadata(self.tp.topic, self.tp.partition, offset, ts)

    def complete(self, base_offset: int) -> None:
        """Acknowledged at `base_offset` (-1: written, offset unknown)."""
        if not self.done.is_set():
            self.base_offset = base_offset
            # Riders are answered first: whoever saw this batch done finds them done too.
            at = base_offset + (self.arrow.num_rows if self.arrow is not None else 0)
            for rider in self.riders:
                rider.complete(at if base_offset >= 0 else -1)
                at += rider.record_count
            self._finish()

    def fail(self, exc: BaseException) -> None:
        if not self.done.is_set():
            self.error = exc
            for rider in self.riders:
                rider.fail(exc)
            self._finish()

    def on_done(self, fn: Callable[[], object]) -> None:
        """Call `fn()` once the batch is answered (at once if it is)."""
        with CALLBACKS_LOCK:
            if not self.done.is_set():
                if self.callbacks is None:
                    self.callbacks = []
                self.callbacks.append(fn)
                return
        fn()

    def waited(self) -> None:
        """A caller blocks on one of its records: no batch queued now should wait for its
        linger_ms (they go as soon as the sender can take them)."""
        if self.on_wait is not None and not self.closed:
            self.on_wait(self)

    def _finish(self) -> None:
        # The request body is the big part; nothing resends it now.
        self.body = self.encoding = None
        with CALLBACKS_LOCK:
            self.done.set()
            callbacks, self.callbacks = self.callbacks, None
        for fn in callbacks or ():
            try:
                fn()
            except Exception:
                log.exception("producer callback raised")


def rejected(tp: TopicPartition, timestamp: int, error: BaseException) -> RecordFuture:
    """The delivery report of a record refused before queueing (e.g. too large)."""
    batch = ProducerBatch(tp, deadline=0.0, timestamps=[timestamp], values=[None], keys=[None])
    batch.headers.append(None)
    batch.fail(error)
    return RecordFuture(batch, 0)
