"""Client quotas and the long-poll cap on Kafka connections: HTTP's protections, Kafka's way.

Quotas: the broker's QuotaManager (cluster/http/quota_manager.py), shared with HTTP, so a
principal's bytes count once whichever protocol carries them. As Kafka's ClientQuotaManager
does, a Produce request's bytes and a Fetch response's record bytes are recorded once the
request is served, and a principal over its rate gets the time to wait in the response's
throttle_time_ms, and its connection is muted for that long: from Produce v6 / Fetch v8 on
(KIP-219) the answer goes out at once and the connection's next request waits out the
throttle before it is served; for older versions, whose clients do not back off by
themselves, the answer itself waits. Unlike HTTP's 429, nothing is refused: the producer's
records are written, and a throttled connection simply goes quiet. (The wait happens where
the request is served, not where bytes are read, so it holds however many requests a
connection reads ahead.)

Tiering backpressure (ingest/tiered/untiered_bound.py): HTTP's answer is a retriable 503
with THROTTLING_QUOTA_EXCEEDED, but that code (89) in a Produce answer is a permanent error
to librdkafka, which failed the records. Over Kafka it is REQUEST_TIMED_OUT, which every
client retries (and the project's code for "this node is busy", as HTTP's broker-wide 503s),
with the Retry-After as throttle time: the client waits, then resends what was not written.

Long polls: the broker's --max-long-polls slots are shared with HTTP fetches. A Fetch that
would wait for data (max_wait > 0) and finds no slot is answered at once with what is there;
when that is nothing, it carries a throttle time of its max wait (at most a second), so the
client comes back then instead of spinning, as HTTP's 503 Retry-After asks.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import cast

from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.fetch.v12.response import FetchResponse
from kio.static.primitive import i32Timedelta
from kio.static.protocol import ResponsePayload

from cluster import metrics
from cluster.http.inflight import SlotCounter
from cluster.http.limits import LimitError
from cluster.http.quota_manager import QuotaKind, QuotaManager
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import FETCH, PRODUCE, RequestHeader
from ingest.service.partitions import Partition
from logformat.errors import ErrorCode, TierlogError

# The first version whose client backs off by throttle_time_ms itself (KIP-219).
_CLIENT_BACKS_OFF = {PRODUCE: 6, FETCH: 8}
_BUSY_BACKOFF_S = 1.0  # a refused long poll comes back after its max wait, at most this


FetchHandler = Callable[[KafkaContext, FetchRequest, type[FetchResponse]], Awaitable[FetchResponse]]


def _records_bytes(body: FetchResponse) -> int:
    return sum(len(p.records or b"") for t in body.responses for p in t.partitions)


def leader_for_write(ctx: KafkaContext, topic: str, partition: int) -> Partition:
    """The partition's leader state for a produce; refused while tiering is behind, as a
    retriable Kafka error (see above)."""
    try:
        return ctx.services.produce.leader(topic, partition)
    except LimitError as exc:
        ctx.backoff_s = max(ctx.backoff_s, float(exc.headers.get("Retry-After", "1")))
        raise TierlogError(ErrorCode.REQUEST_TIMED_OUT, exc.message) from None


class KafkaClientLimits:
    def __init__(self, quotas: QuotaManager, long_polls: SlotCounter) -> None:
        self.quotas = quotas
        self.long_polls = long_polls

    async def fetch(
        self,
        handler: FetchHandler,
        ctx: KafkaContext,
        request: FetchRequest,
        response_cls: type[FetchResponse],
    ) -> FetchResponse:
        """Serve a Fetch through `handler`, holding a long-poll slot while it may wait."""
        if request.max_wait <= timedelta(0) or request.min_bytes <= 0:
            return await handler(ctx, request, response_cls)
        if self.long_polls.try_take():
            try:
                return await handler(ctx, request, response_cls)
            finally:
                self.long_polls.give_back()
        metrics.REJECTED_REQUESTS.labels("long_polls").inc()
        body = await handler(
            ctx,
            dataclasses.replace(request, max_wait=i32Timedelta.parse(timedelta(0))),
            response_cls,
        )
        if _records_bytes(body) == 0:
            ctx.backoff_s = min(request.max_wait.total_seconds(), _BUSY_BACKOFF_S)
        return body

    @staticmethod
    async def wait_unmuted(ctx: KafkaContext) -> None:
        """Before serving a connection's request: wait out the throttle its last answer gave."""
        wait_s = ctx.muted_until - asyncio.get_running_loop().time()
        if wait_s > 0:
            await asyncio.sleep(wait_s)

    async def charge(
        self,
        ctx: KafkaContext,
        header: RequestHeader,
        request_bytes: int,
        body: ResponsePayload | None,
    ) -> ResponsePayload | None:
        """Count a served Produce's or Fetch's bytes against the caller's quota; `body` with
        the throttle time, the connection muted for it (see the module's docstring)."""
        if header.api_key == PRODUCE:
            kind, nbytes = QuotaKind.PRODUCE, request_bytes
        elif header.api_key == FETCH:
            kind, nbytes = QuotaKind.FETCH, _records_bytes(cast(FetchResponse, body))
        else:
            return body
        self.quotas.record(kind, ctx.principal, nbytes)
        throttle_ms = self.quotas.throttle_ms(kind, ctx.principal)
        if throttle_ms > 0:
            metrics.QUOTA_THROTTLED_REQUESTS.labels(kind.value, ctx.principal).inc()
            metrics.QUOTA_THROTTLE_SECONDS.labels(kind.value, ctx.principal).inc(throttle_ms / 1000)
        hold_s = max(throttle_ms / 1000, ctx.backoff_s)
        ctx.backoff_s = 0.0
        if hold_s <= 0:
            return body
        if header.api_version < _CLIENT_BACKS_OFF[header.api_key]:
            await asyncio.sleep(hold_s)  # the answer itself is delayed
        else:
            ctx.muted_until = asyncio.get_running_loop().time() + hold_s
        if body is None:  # acks=0: no answer, the connection is muted all the same
            return None
        return dataclasses.replace(body, throttle_time=timedelta(seconds=hold_s))
