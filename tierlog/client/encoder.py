"""Encodes closed producer batches on a thread of their own, ahead of their turn to be sent.

A batch's Arrow IPC body does not depend on its producer id or sequence (those travel in
headers), so it can be built as soon as the batch takes no more records: by the time the
sender has a free in-flight slot for it, the body is usually ready. The producer's I/O loop
never encodes, so answers are read and requests written while batches are built. Retries
reuse the body (batch.py), so a retried batch stays byte-identical.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from tierlog.client.batch import ProducerBatch


class BatchEncoder:
    def __init__(self, compression: str | None) -> None:
        self.compression = compression
        # One thread: bodies come out in the order batches closed (per partition that is
        # their send order), and encoding holds the GIL for most of its work anyway.
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="tierlog-producer-encode")
        self._lock = threading.Lock()  # check-and-set of batch.encoding only, never I/O
        self._closed = False

    def start(self, batch: ProducerBatch) -> None:
        """Begin encoding `batch` (closed: it takes no more records) unless it has begun."""
        with self._lock:
            if self._closed or batch.encoding is not None or batch.body is not None:
                return
            if batch.done.is_set():
                return  # answered already (refused, expired): nothing will send it
            batch.encoding = self._pool.submit(batch.encode, self.compression)

    async def body(self, batch: ProducerBatch) -> bytes:
        """`batch`'s request body, waiting for (not doing) its encoding on the I/O loop."""
        if batch.body is not None:
            return batch.body
        self.start(batch)
        future = batch.encoding
        if future is None:  # closed encoder: the producer is stopping, encode here
            return batch.encode(self.compression)
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
