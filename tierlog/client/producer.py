"""The Producer: Kafka's producer API over tierlog's HTTP produce (DESIGN §1, §5).

    with Producer("http://127.0.0.1:8080") as producer:
        future = producer.send("clicks", b"value", key=b"user-1")
        print(future.result())           # RecordMetadata(topic, partition, offset, timestamp)

`send()` partitions the record (Kafka's default partitioner), appends it to its partition's
batch and returns at once; a background sender posts batches as Arrow IPC streams straight to
partition leaders, honouring linger_ms, batch_size, acks and max_in_flight, and retrying with
the same producer id and sequence (idempotence, on by default) so retries never duplicate.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import CancelledError, Future
from typing import Any

import httpx

from tierlog.client.accumulator import RecordAccumulator
from tierlog.client.batch import record_size
from tierlog.client.config import ProducerConfig
from tierlog.client.errors import ApiError, ClientClosedError, ClientTimeoutError
from tierlog.client.lifecycle import ClientBase
from tierlog.client.metadata import ClusterMetadata
from tierlog.client.partitioner import Partitioner
from tierlog.client.sender import Sender
from tierlog.client.types import Header, RecordMetadata, TopicPartition

log = logging.getLogger("tierlog.client.producer")

Serializer = Callable[[Any], bytes | None]
Callback = Callable[[RecordMetadata | None, BaseException | None], object]
HeadersArg = Mapping[str, bytes | str | None] | Iterable[tuple[str, bytes | str | None]] | None


def to_bytes(value: object, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{what} must be bytes, str or None (or give a {what}_serializer)")


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
        self._accumulator = RecordAccumulator(
            batch_size=self.config.batch_size,
            linger_ms=self.config.linger_ms,
            buffer_memory=self.config.buffer_memory,
            delivery_timeout_ms=self.config.delivery_timeout_ms,
            on_batch_closed=lambda tp: self._partitioner.batch_closed(tp.topic, tp.partition),
            wake_sender=self._wake_sender,
        )
        self._sender = Sender(self.config, self._accumulator, self._metadata, self._http)
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
    ) -> Future[RecordMetadata]:
        """Queue a record; the future resolves to its RecordMetadata once acknowledged (or
        to the error). `callback(metadata, error)` runs on the producer's I/O thread: keep
        it short and do not call flush() or close() from it."""
        if self._closed:
            raise ClientClosedError("producer")
        k = self._key_serializer(key) if self._key_serializer else to_bytes(key, "key")
        v = self._value_serializer(value) if self._value_serializer else to_bytes(value, "value")
        hs = to_headers(headers)
        ts = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
        size = record_size(k, v, hs)
        if size > self.config.max_request_size:
            future: Future[RecordMetadata] = Future()
            future.set_exception(
                ApiError(
                    "MESSAGE_TOO_LARGE",
                    f"a record of ~{size} bytes exceeds max_request_size "
                    f"({self.config.max_request_size})",
                )
            )
        else:
            p = self._partition(topic, k, partition)
            future = self._accumulator.append(
                TopicPartition(topic, p), k, v, hs, ts, self.config.max_block_ms / 1000, size
            )
        if callback is not None:
            future.add_done_callback(lambda f: _run_callback(callback, f))
        return future

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

    def _partition(self, topic: str, key: bytes | None, explicit: int | None) -> int:
        count = self._partition_count(topic)
        if explicit is not None and explicit >= count:
            count = self._partition_count(topic, refresh=True)  # maybe partitions were added
        return self._partitioner.partition(topic, key, count, explicit)


def _run_callback(callback: Callback, future: Future[RecordMetadata]) -> None:
    try:
        if future.cancelled():
            callback(None, CancelledError())
            return
        error = future.exception()
        callback(None if error else future.result(), error)
    except Exception:
        log.exception("producer callback raised")
