"""A producer batch: records for one partition, sent as one Arrow IPC stream request.

The body is encoded once, when the batch is first sent, and reused for every retry, so a
retried batch is byte-identical and keeps its producer id, epoch and base sequence: the
leader recognises it and answers with the original offsets instead of writing it twice.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

import pyarrow as pa

from logformat.schema import HEADERS
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
    batch = pa.RecordBatch.from_pydict(columns)
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
    futures: list[Future[RecordMetadata]] = field(default_factory=list)
    size: int = 0
    closed: bool = False  # takes no more records
    # Set when first sent, kept for every retry (idempotence).
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    body: bytes | None = None
    send_order: int = -1  # per partition, set when first sent (the sequencer's ordering)
    unwritten: bool = False  # the last answer proved the leader did not append it
    # Base sequences of older batches still unanswered when this attempt went out: if the
    # leader then wants one of those, this attempt overtook it and only needs resending.
    behind: frozenset[int] = frozenset()
    attempts: int = 0
    retry_at: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def record_count(self) -> int:
        return len(self.keys)

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
    ) -> Future[RecordMetadata] | None:
        """Add a record unless the batch is closed or would pass `limit` bytes (a batch
        always takes its first record, however large)."""
        if self.closed or (self.keys and self.size + size > limit):
            return None
        future: Future[RecordMetadata] = Future()
        self.keys.append(key)
        self.values.append(value)
        self.headers.append(headers)
        self.timestamps.append(timestamp)
        self.futures.append(future)
        self.size += size
        return future

    def encode(self, compression: str | None) -> bytes:
        if self.body is None:
            self.body = encode_records(
                self.keys,
                self.values,
                self.headers,
                self.timestamps,
                self.tp.partition,
                compression,
            )
        return self.body

    def complete(self, base_offset: int) -> None:
        """Resolve every record's future: offsets are consecutive from `base_offset`
        (-1 for all when the offset is unknown, as with acks=0)."""
        if self.done.is_set():
            return
        topic, p = self.tp
        for i, (future, ts) in enumerate(zip(self.futures, self.timestamps, strict=True)):
            offset = base_offset + i if base_offset >= 0 else -1
            if future.set_running_or_notify_cancel():
                future.set_result(RecordMetadata(topic, p, offset, ts))
        self._finish()

    def fail(self, exc: BaseException) -> None:
        if self.done.is_set():
            return
        for future in self.futures:
            if future.set_running_or_notify_cancel():
                future.set_exception(exc)
        self._finish()

    def _finish(self) -> None:
        self.body = None  # the request body is the big part; nothing resends it now
        self.done.set()
