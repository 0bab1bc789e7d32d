"""The producer's sender: takes ready batches and sends them to partition leaders.

Runs on the producer's I/O loop. Each batch is one POST of an Arrow IPC stream to its
partition's leader, with the idempotence headers when enabled; answers resolve the records'
futures, and failures are retried with exponential backoff as the PartitionSequencer decides.

At most `max_in_flight` requests are in flight per leader (Kafka's per-connection limit);
its partitions take turns for them (the accumulator's rounds), retries first. Bodies are
built by the BatchEncoder's thread, never on this loop, and no lock is held across I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import Any

import orjson

from tierlog.client.accumulator import RecordAccumulator
from tierlog.client.batch import ProducerBatch
from tierlog.client.config import ProducerConfig
from tierlog.client.encoder import BatchEncoder
from tierlog.client.errors import (
    ApiError,
    ClientClosedError,
    ClientTimeoutError,
    error_from_response,
)
from tierlog.client.http import ARROW_STREAM, AsyncHttp
from tierlog.client.metadata import ClusterMetadata, topic_path
from tierlog.client.sequencer import NO_IDENTITY, Decision, Identity, PartitionSequencer
from tierlog.client.types import TopicPartition

log = logging.getLogger("tierlog.client.producer")


class Sender:
    def __init__(
        self,
        config: ProducerConfig,
        accumulator: RecordAccumulator,
        metadata: ClusterMetadata,
        http: AsyncHttp,
        encoder: BatchEncoder | None = None,
    ) -> None:
        self.config = config
        self.encoder = encoder or BatchEncoder(config.compression)
        self.acc = accumulator
        self.metadata = metadata
        self.http = http
        self.idempotent = bool(config.enable_idempotence)
        self.identity = NO_IDENTITY
        self._sequencers: dict[TopicPartition, PartitionSequencer] = {}
        self._leader_inflight: dict[str, int] = {}  # requests in flight per leader URL
        self._tasks: set[asyncio.Task[Any]] = set()
        self._identity_task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._stopped: asyncio.Event | None = None

    # --- control (from the loop; other threads go through IOThread.call_soon) ---
    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        self._wake = asyncio.Event()
        self._stopped = asyncio.Event()
        try:
            while True:
                now = time.monotonic()
                self._expire(now)
                self._reset_partitions()
                self._send_ready(now)
                if self._closing and self._all_done():
                    return
                timeout = self._next_wakeup(now)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):  # no task made per turn, as wait_for's
                        await self._wake.wait()
                self._wake.clear()
        finally:
            self.encoder.close()
            self._stopped.set()

    async def close(self, timeout_s: float | None) -> None:
        """Send everything queued, then stop; after `timeout_s` fail what is left."""
        self._closing = True
        self.wake()
        if self._stopped is None:
            return
        try:
            await asyncio.wait_for(self._stopped.wait(), timeout_s)
        except TimeoutError:
            self.abort(ClientClosedError("producer (closed before these records were sent)"))
            await self._stopped.wait()

    def abort(self, exc: BaseException) -> None:
        """Fail every queued and waiting batch and cancel in-flight requests."""
        self._closing = True
        for batch in self.acc.drain_all():
            self._fail(batch, exc)
        for seq in self._sequencers.values():
            for batch in seq.take_retries():
                self._fail(batch, exc)
        for task in list(self._tasks):
            task.cancel()
        if self._identity_task is not None:
            self._identity_task.cancel()
        self.wake()

    # --- one pass of the loop ---
    def _sequencer(self, tp: TopicPartition) -> PartitionSequencer:
        seq = self._sequencers.get(tp)
        if seq is None:
            seq = PartitionSequencer(self.config.max_in_flight, self.idempotent)
            self._sequencers[tp] = seq
        if self.idempotent and seq.identity == NO_IDENTITY and self.identity != NO_IDENTITY:
            seq.adopt(self.identity)
        return seq

    def _admit(self, batch: ProducerBatch) -> bool:
        """May `batch` go now? If so, it is stamped and counted in flight."""
        seq = self._sequencer(batch.tp)
        if self.idempotent and seq.identity == NO_IDENTITY:
            return False  # no producer id yet
        if seq.allowed_new() <= 0:
            return False
        url = self.metadata.leader_url(batch.tp)
        if not self._slot_free(url):
            return False
        seq.send(batch)
        self._take_slot(batch, url)
        return True

    def _slot_free(self, url: str) -> bool:
        return self._leader_inflight.get(url, 0) < self.config.max_in_flight

    def _take_slot(self, batch: ProducerBatch, url: str) -> None:
        batch.leader = url
        self._leader_inflight[url] = self._leader_inflight.get(url, 0) + 1

    def _free_slot(self, batch: ProducerBatch) -> None:
        left = self._leader_inflight.get(batch.leader, 0) - 1
        if left > 0:
            self._leader_inflight[batch.leader] = left
        else:
            self._leader_inflight.pop(batch.leader, None)

    def _send_ready(self, now: float) -> None:
        if self.idempotent and self.identity == NO_IDENTITY:
            self._ensure_identity()
            return
        for tp, seq in self._sequencers.items():
            due = seq.next_retry_time()
            if due is None or due > now:
                continue
            url = self.metadata.leader_url(tp)
            if not self._slot_free(url):
                continue  # a slot frees when an answer comes, and wakes this loop
            batch = seq.next_retry(now)
            if batch is not None:
                self._take_slot(batch, url)
                self._start(batch)
        for batch in self.acc.ready(now, self._admit):
            self._start(batch)

    def _start(self, batch: ProducerBatch) -> None:
        task = asyncio.ensure_future(self._send(batch))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        # Wake the loop only now: a wake from inside the task would find it still listed.
        self._tasks.discard(task)
        self.wake()

    def _expire(self, now: float) -> None:
        for batch in self.acc.expired(now):
            self._fail(
                batch,
                ClientTimeoutError(
                    f"{batch.record_count} record(s) for {batch.tp.topic}-{batch.tp.partition} "
                    f"expired: delivery_timeout_ms ({self.config.delivery_timeout_ms}) passed "
                    "before they could be sent"
                ),
            )

    def _reset_partitions(self) -> None:
        """Give partitions whose sequence broke a fresh producer id (KIP-360's epoch bump)."""
        for tp, seq in self._sequencers.items():
            if not seq.ready_to_reset():
                continue
            if self.identity.generation <= seq.identity.generation:
                self._ensure_identity(renew=True)
                continue
            log.warning("producer id reset for %s-%d after a failed batch", *tp)
            for batch in seq.reset(self.identity):
                self._fail(
                    batch,
                    ApiError(
                        "OUT_OF_ORDER_SEQUENCE_NUMBER",
                        "an earlier batch of this partition failed; this one may or may not "
                        "have been written, so it is not resent (that could duplicate it)",
                    ),
                )

    def _next_wakeup(self, now: float) -> float | None:
        times = [self.acc.next_linger_expiry(), self.acc.next_deadline()]
        times += [s.next_retry_time() for s in self._sequencers.values()]
        due = [t for t in times if t is not None]
        return max(0.0, min(due) - now) if due else None

    def _all_done(self) -> bool:
        return (
            not self._tasks
            and not self.acc.queued_partitions()
            and all(s.idle for s in self._sequencers.values())
        )

    # --- the producer id ---
    def _ensure_identity(self, renew: bool = False) -> None:
        if self._identity_task is None or self._identity_task.done():
            self._identity_task = asyncio.ensure_future(self._new_identity(renew))

    async def _new_identity(self, renew: bool) -> None:
        """POST /producers until it answers (batches expire meanwhile if it never does)."""
        wanted = self.identity.generation + 1 if renew else 0
        if self.identity.generation >= wanted:
            return
        backoff = self.config.retry_backoff_ms / 1000
        while True:
            try:
                deadline = time.monotonic() + self.config.request_timeout_ms / 1000
                doc = await self.http.call_any(
                    "POST", "/producers", body={}, deadline=deadline, idempotent=True
                )
                self.identity = Identity(
                    int(doc["producer_id"]),
                    int(doc.get("producer_epoch", 0)),
                    self.identity.generation + 1,
                )
                self.wake()
                return
            except ApiError as exc:
                log.warning("could not get a producer id: %s", exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000)

    # --- one request ---
    async def _send(self, batch: ProducerBatch) -> None:
        batch.attempts += 1
        tp = batch.tp
        try:
            body = await self.encoder.body(batch)
            headers = {"content-type": ARROW_STREAM}
            if batch.base_sequence >= 0:
                headers["x-tierlog-producer-id"] = str(batch.producer_id)
                headers["x-tierlog-producer-epoch"] = str(batch.producer_epoch)
                headers["x-tierlog-sequence"] = str(batch.base_sequence)
            url = batch.leader + topic_path(tp.topic) + "/records"
            response = await self.http.request(
                "POST",
                url,
                content=body,
                headers=headers,
                params={"acks": self.config.acks},
                timeout_s=self.config.request_timeout_ms / 1000,
            )
            self.metadata.note_leader(tp, response.headers.get("x-tierlog-leader"))
            if response.status_code >= 400:
                raise error_from_response(response)
            base = self._base_offset(response.content, tp.partition)
        except ApiError as exc:
            self._on_error(batch, exc)
        except asyncio.CancelledError:
            closed = ClientClosedError("producer")
            self._sequencer(tp).on_error(
                batch, ApiError("NETWORK_EXCEPTION", str(closed)), can_retry=False, retry_at=0.0
            )
            self._fail(batch, closed)
            raise
        except Exception as exc:  # e.g. values Arrow cannot encode: not worth retrying
            self._sequencer(tp).on_error(
                batch, ApiError("INVALID_RECORD", str(exc)), can_retry=False, retry_at=0.0
            )
            self._fail(batch, exc)
        else:
            self._sequencer(tp).on_success(batch)
            batch.complete(base)
            self.acc.release(batch)
        finally:
            self._free_slot(batch)
            self.wake()

    def _base_offset(self, content: bytes, partition: int) -> int:
        if self.config.acks == "0":
            return -1
        doc = orjson.loads(content)
        for part in doc.get("partitions") or []:
            if part.get("partition") == partition:
                if "error_code" in part:
                    raise ApiError(part["error_code"], str(part.get("message", "")), 200)
                return int(part["base_offset"])
        raise ApiError("UNKNOWN_SERVER_ERROR", f"no answer for partition {partition}: {doc}")

    def _on_error(self, batch: ProducerBatch, exc: ApiError) -> None:
        tp = batch.tp
        if exc.stale_metadata:
            self.metadata.invalidate(tp)
            self._refresh(tp.topic)
        now = time.monotonic()
        cap = self.config.retry_backoff_max_ms / 1000
        backoff = min(cap, self.config.retry_backoff_ms / 1000 * 2 ** (batch.attempts - 1))
        retry_at = now + backoff * random.uniform(0.8, 1.2)  # jitter spreads retry storms
        # A throttled or busy broker names its wait (429/503 Retry-After): never come sooner.
        # The batch keeps its body and sequence, so the retry cannot duplicate it.
        retry_at = max(retry_at, now + exc.retry_after_s)
        in_time = retry_at < batch.deadline
        can_retry = batch.attempts <= self.config.retries and in_time
        decision = self._sequencer(tp).on_error(batch, exc, can_retry=can_retry, retry_at=retry_at)
        if decision is Decision.WRITTEN:
            batch.complete(-1)
            self.acc.release(batch)
        elif decision is Decision.FAIL:
            if exc.retriable and not in_time:
                self._fail(
                    batch,
                    ClientTimeoutError(
                        f"delivery_timeout_ms ({self.config.delivery_timeout_ms}) passed for "
                        f"{batch.record_count} record(s) to {tp.topic}-{tp.partition}; "
                        f"last error: {exc}"
                    ),
                )
            else:
                self._fail(batch, exc)
        else:
            log.debug(
                "retrying %s-%d (attempt %d): %s", tp.topic, tp.partition, batch.attempts, exc
            )

    def _refresh(self, topic: str) -> None:
        async def refresh() -> None:
            with contextlib.suppress(Exception):
                await self.metadata.topic(topic, force=True)

        task = asyncio.ensure_future(refresh())
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _fail(self, batch: ProducerBatch, exc: BaseException) -> None:
        batch.fail(exc)
        self.acc.release(batch)
