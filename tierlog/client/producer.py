"""The Producer: Kafka's producer API over tierlog's HTTP produce (docs/design.md §1, §5).

    with Producer("http://127.0.0.1:8080") as producer:
        future = producer.send("clicks", b"value", key=b"user-1")
        print(future.result())           # RecordMetadata(topic, partition, offset, timestamp)

`send()` partitions the record (Kafka's default partitioner), appends it to its partition's
batch and returns at once; a background sender posts batches as Arrow IPC streams straight to
partition leaders, honouring linger_ms, batch_size, acks and max_in_flight, and retrying with
the same producer id and sequence (idempotence, on by default) so retries never duplicate.

linger_ms and batch_size trade latency for throughput. A batch goes when it is full
(batch_size bytes), linger_ms after its first record, on flush(), or once a caller blocks on
a future (what is queued then stops lingering); while its leader already
has max_in_flight requests out it keeps filling. Raise both (say linger_ms=20,
batch_size=1 MiB) for fewer, larger requests when producing fast; lower them (linger_ms=0)
when records are few and each should go at once. send_batch / send_table fill whole
requests (max_request_size) regardless.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import httpx
import pyarrow as pa
import pyarrow.compute as pc

from logformat.schema import HEADERS
from tierlog.client.accumulator import RecordAccumulator
from tierlog.client.batch import RECORD_OVERHEAD, record_size, rejected
from tierlog.client.bulk import assign_partitions, binary_column, plan_batches, produce_table
from tierlog.client.config import ProducerConfig
from tierlog.client.delivery import BulkDelivery, Callback, RecordFuture, run_callback
from tierlog.client.encoder import BatchEncoder
from tierlog.client.errors import ApiError, ClientClosedError, ClientTimeoutError
from tierlog.client.lifecycle import ClientBase
from tierlog.client.metadata import ClusterMetadata
from tierlog.client.partitioner import Partitioner
from tierlog.client.sender import Sender
from tierlog.client.types import Header, TopicPartition

log = logging.getLogger("tierlog.client.producer")
ROUTE_RECHECK_S = 1.0

Serializer = Callable[[Any], bytes | None]
HeadersArg = Mapping[str, bytes | str | None] | Iterable[tuple[str, bytes | str | None]] | None


def to_bytes(value: object, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{what} must be bytes, str or None (or give a {what}_serializer)")


def _header_rows(headers: list[Header] | None) -> list[dict[str, object]] | None:
    return None if headers is None else [{"key": k, "value": v} for k, v in headers]


def to_headers(headers: HeadersArg) -> list[Header] | None:
    if not headers:
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: list[Header] = []
    for name, value in pairs:
        if not isinstance(name, str):
            raise TypeError("header names must be str")
        out.append((name, to_bytes(value, "header value")))
    return out or None


class Producer(ClientBase):
    def __init__(
        self,
        bootstrap: str | Sequence[str] = "http://127.0.0.1:8080",
        *,
        key_serializer: Serializer | None = None,
        value_serializer: Serializer | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
        verify: bool | str = True,
        **config: Any,
    ) -> None:
        """`config`: ProducerConfig's fields (acks, linger_ms, batch_size, compression_type,
        enable_idempotence, max_in_flight, retries, request_timeout_ms, ...). `transport`
        replaces httpx's network transport (TLS settings, proxies, tests). `api_key`
        (default $TIERLOG_API_KEY) authenticates; `verify` is a CA bundle path or a bool."""
        self.config = ProducerConfig(**config)
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._closed = False
        self._max_block_s = self.config.max_block_ms / 1000
        timeout_s = self.config.request_timeout_ms / 1000
        self._open_io(
            "tierlog-producer-io",
            bootstrap,
            timeout_s=timeout_s,
            transport=transport,
            api_key=api_key,
            verify=verify,
        )
        self._metadata = ClusterMetadata(
            self._http, max_age_ms=self.config.metadata_max_age_ms, timeout_s=timeout_s
        )
        self._partitioner = Partitioner()
        self._routes: dict[str, TopicRoute] = {}
        encoder = BatchEncoder(self.config.compression)
        self._accumulator = RecordAccumulator(
            batch_size=self.config.batch_size,
            linger_ms=self.config.linger_ms,
            buffer_memory=self.config.buffer_memory,
            delivery_timeout_ms=self.config.delivery_timeout_ms,
            on_batch_closed=lambda tp: self._partitioner.batch_closed(tp.topic, tp.partition),
            wake_sender=self._wake_sender,
            on_sealed=encoder.start,
        )
        self._sender = Sender(self.config, self._accumulator, self._metadata, self._http, encoder)
        self._running = self._io.submit(self._sender.run())

    def _wake_sender(self) -> None:
        self._io.call_soon(self._sender.wake)

    # --- the API ---
    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        callback: Callback | None = None,
    ) -> RecordFuture:
        """Queue a record; the future resolves to its RecordMetadata once acknowledged (or
        to the error). `callback(metadata, error)` runs on the producer's I/O thread: keep
        it short and do not call flush() or close() from it."""
        if self._closed:
            raise ClientClosedError("producer")
        # The common case (bytes or None, no serializer) costs no call.
        ks, vs = self._key_serializer, self._value_serializer
        k = ks(key) if ks else key if key is None or type(key) is bytes else to_bytes(key, "key")
        v = (
            vs(value)
            if vs
            else value
            if value is None or type(value) is bytes
            else to_bytes(value, "value")
        )
        hs = to_headers(headers) if headers else None
        ts = time.time_ns() // 1_000_000 if timestamp_ms is None else int(timestamp_ms)
        if hs is None:
            size = RECORD_OVERHEAD + (len(k) if k else 0) + (len(v) if v else 0)
        else:
            size = record_size(k, v, hs)
        if size > self.config.max_request_size:
            future = rejected(
                TopicPartition(topic, -1 if partition is None else partition),
                ts,
                ApiError(
                    "MESSAGE_TOO_LARGE",
                    f"a record of ~{size} bytes exceeds max_request_size "
                    f"({self.config.max_request_size})",
                ),
            )
        else:
            tp = self._partition(topic, k, partition)
            future = self._accumulator.append(tp, k, v, hs, ts, self._max_block_s, size)
        if callback is not None:
            future.add_done_callback(functools.partial(run_callback, callback))
        return future

    def send_batch(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        headers: Sequence[HeadersArg] | None = None,
        timestamp_ms: int | None = None,
    ) -> BulkDelivery:
        """Queue many records at once (partitioned and framed column-wise): as send() for
        each, with the same idempotence and retries, at a fraction of the cost."""
        if keys is not None and len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys for {len(values)} values")
        if headers is not None and len(headers) != len(values):
            raise ValueError(f"{len(headers)} headers for {len(values)} values")
        vs, ks = self._value_serializer, self._key_serializer
        columns: dict[str, pa.Array] = {
            "value": binary_column([vs(v) for v in values] if vs else values)
        }
        if keys is not None:
            columns["key"] = binary_column([ks(k) for k in keys] if ks else keys)
        if headers is not None:
            rows = [_header_rows(to_headers(h)) for h in headers]
            columns["headers"] = pa.array(rows, HEADERS)
        if timestamp_ms is not None:
            columns["timestamp"] = pa.repeat(pa.scalar(int(timestamp_ms), pa.int64()), len(values))
        return self.send_table(topic, pa.table(columns))

    def send_table(self, topic: str, table: pa.Table | pa.RecordBatch) -> BulkDelivery:
        """Queue a table's rows as records: a `value` column (binary or string) and
        optionally `key`, `headers`, `timestamp` (ms) and `partition`."""
        if self._closed:
            raise ClientClosedError("producer")
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        table = produce_table(table)
        tps = self._route(topic).partitions
        if "partition" in table.column_names:
            highest = pc.max(table.column("partition")).as_py()
            if highest is not None and highest >= len(tps):
                tps = self._route(topic, refresh=True).partitions  # maybe partitions were added
        # The records are all here: no reason to wait for batch_size, fill whole requests.
        target = max(self.config.batch_size, self.config.max_request_size)
        avg = max(1, table.nbytes // max(1, table.num_rows))
        parts = assign_partitions(table, topic, len(tps), self._partitioner, max(1, target // avg))
        batches, starts, perm = plan_batches(
            table, parts, topic, target, self.config.max_request_size
        )
        for batch in batches:
            if not batch.done.is_set():  # records refused up front are answered already
                self._accumulator.append_framed(batch, self._max_block_s, target)
        return BulkDelivery(batches, starts, perm)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now (ignoring linger_ms) and wait until it is answered."""
        if self._io.in_loop:
            raise RuntimeError("flush() from a send callback would deadlock")
        deadline = None if timeout is None else time.monotonic() + timeout
        self._accumulator.begin_flush()
        try:
            for batch in self._accumulator.incomplete():
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not batch.done.wait(left):
                    raise ClientTimeoutError(f"flush did not finish within {timeout}s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued (for up to `timeout` seconds; the rest fails), then stop."""
        if self._closed:
            return
        if self._io.in_loop:
            raise RuntimeError("close() from a send callback would deadlock")
        self._closed = True
        self._accumulator.close()
        try:
            self._io.run(self._sender.close(timeout))
            with contextlib.suppress(Exception):
                self._running.result(5)
        finally:
            self._close_io()

    def partitions_for(self, topic: str) -> list[int]:
        count = self._partition_count(topic, refresh=True)
        return list(range(count))

    # --- helpers ---
    def _partition_count(self, topic: str, refresh: bool = False) -> int:
        count = self._metadata.partition_count(topic)
        if count is None or refresh:
            meta = self._io.run(
                self._metadata.topic(topic, force=refresh), self.config.max_block_ms / 1000
            )
            return len(meta.partitions)
        if self._metadata.wants_refresh(topic):  # in the background: send() need not wait
            refresh_future = self._io.submit(self._metadata.topic(topic))
            refresh_future.add_done_callback(lambda f: f.exception())
        return count

    def _route(self, topic: str, refresh: bool = False) -> TopicRoute:
        """The topic's partitions, rechecked against metadata at most every ROUTE_RECHECK_S
        (the metadata, not each send(), decides when to refresh)."""
        route = self._routes.get(topic)
        if route is not None and not refresh and time.monotonic() < route.recheck_at:
            return route
        count = self._partition_count(topic, refresh)
        route = TopicRoute(
            tuple(TopicPartition(topic, p) for p in range(count)),
            time.monotonic() + ROUTE_RECHECK_S,
        )
        self._routes[topic] = route
        return route

    def _partition(self, topic: str, key: bytes | None, explicit: int | None) -> TopicPartition:
        route = self._routes.get(topic)
        if route is None or time.monotonic() >= route.recheck_at:
            route = self._route(topic)
        tps = route.partitions
        if explicit is None:
            if key is None:
                return tps[self._partitioner.sticky(topic, len(tps))]
            return tps[self._partitioner.for_key(key, len(tps))]
        if explicit >= len(tps):
            tps = self._route(topic, refresh=True).partitions  # maybe partitions were added
        return tps[self._partitioner.partition(topic, key, len(tps), explicit)]


class TopicRoute(NamedTuple):
    partitions: tuple[TopicPartition, ...]
    recheck_at: float  # time.monotonic()
