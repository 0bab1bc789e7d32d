"""The follower's side of replication: one long-polling fetch loop per leader broker.

Each loop asks its leader for all the partitions this broker follows there, in one request;
frames are appended exactly as received. A divergence answer truncates the local tail to
the leader's epoch boundary before fetching on (KIP-279); an epoch mismatch or a moved
leadership makes the broker refresh metadata and back off briefly. A partition that makes no
progress (an answer that changes nothing, asked again, would loop) is reported once in a while,
saying why, and the loop backs off until something changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import httpx

from cluster.internal_http import PeerLink, internal_transport, post_direct
from failures.logged import log_failure
from ingest.log_throttle import LogThrottle
from ingest.replication import corruption
from ingest.replication.death_signal import dropped
from ingest.replication.partition import Partition, Role
from ingest.replication.wire import (
    FetchPartition,
    PartitionReply,
    decode_response,
    encode_request,
)
from metadata.types import TopicNamePartition

log = logging.getLogger("tierlog.replica_fetcher")

MAX_WAIT_MS = 500
MAX_BYTES = 8 * 1024 * 1024
FETCH_TIMEOUT = httpx.Timeout(30.0, connect=2.0)
STALL_BACKOFF_S = (0.1, 2.0)  # first and longest wait of a loop that makes no progress
_THROTTLE = LogThrottle(every_s=30.0)


class LeaderUnavailable(Exception):
    """The leader did not answer a fetch (unreachable, or an error status)."""


class ReplicaFetcher:
    """Follows every partition led by one broker."""

    def __init__(
        self,
        me: int,
        leader_id: int,
        leader_url: Callable[[], str | None],
        token: Callable[[], str],
        refresh_metadata: Callable[[], Awaitable[None]],
        link: PeerLink = internal_transport,
        on_dropped: Callable[[int], None] = lambda leader_id: None,
    ) -> None:
        self.me, self.leader_id = me, leader_id
        # Told when the leader's end of the connection is gone (death_signal.py), not slow.
        self.on_dropped = on_dropped
        self.leader_url, self.token, self.refresh_metadata = leader_url, token, refresh_metadata
        self.partitions: dict[TopicNamePartition, Partition] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._stalled = False  # the last response changed nothing for some partition
        self._transport = link()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"fetcher-{self.leader_id}")

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=5)
            if self._task.done() and not self._task.cancelled():
                self._task.exception()  # retrieved, so it is not reported as never awaited
        await self._transport.aclose()

    def _request(self) -> tuple[list[FetchPartition], list[Partition]]:
        parts, states = [], []
        for state in self.partitions.values():
            if state.role is not Role.FOLLOWER or state.leader_id != self.leader_id:
                continue
            if state.log.failure is not None:
                continue  # offline until ReplicaManager.heal_offline reopens it
            if not corruption.repair(state):  # a corrupt frame found here: fetch it again
                continue  # ... once out of the ISR: until then, not fetching drops it
            parts.append(
                FetchPartition(
                    state.topic,
                    state.topic_id,
                    state.partition,
                    state.leader_epoch,
                    state.log.log_end_offset,
                    state.log.latest_epoch,  # the newest epoch entry, held in memory
                )
            )
            states.append(state)
        return parts, states

    async def _run(self) -> None:
        # Nothing ends this loop but stop(): a follower whose fetcher died would never catch up
        # again, silently (the leader's ISR shrinks it out for good). Postgres away during the
        # metadata refresh, or a bug in one round, costs a back-off, not the loop.
        backoff, stall = 0.05, STALL_BACKOFF_S[0]
        while not self._stopping:
            try:
                fetched = await self._round()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failed(exc)
                await asyncio.sleep(backoff)
                backoff = min(1.0, backoff * 2)
                continue
            backoff = 0.05
            if not fetched:
                continue
            if self._stalled:
                await asyncio.sleep(stall)
                stall = min(STALL_BACKOFF_S[1], stall * 2)
            else:
                stall = STALL_BACKOFF_S[0]

    async def _round(self) -> bool:
        """One fetch from the leader, applied; False when there was nothing to ask for."""
        parts, states = self._request()
        url = self.leader_url()
        if not parts or url is None:
            await asyncio.sleep(0.1)
            return False
        try:
            status, body = await post_direct(
                self._transport,
                f"{url}/internal/replicas/fetch",
                encode_request(self.me, MAX_WAIT_MS, MAX_BYTES, parts),
                self.token(),
                FETCH_TIMEOUT,
            )
        except httpx.HTTPError as exc:
            if dropped(exc) and not self._stopping:
                self.on_dropped(self.leader_id)
            raise LeaderUnavailable(str(exc)) from exc
        if status != 200:
            text = body[:200].decode("utf-8", "replace")
            raise LeaderUnavailable(f"HTTP {status}: {text}")
        replies = decode_response(body)
        if self._apply(replies, states):
            await self.refresh_metadata()  # raises while Postgres is away: _run backs off
            await asyncio.sleep(0.05)
        return True

    def _failed(self, exc: Exception) -> None:
        if isinstance(exc, LeaderUnavailable):  # a leader away or busy: usual, quietly
            log.debug("replica fetch failed", extra={"leader": self.leader_id, "error": str(exc)})
            return
        skipped = _THROTTLE.allow(("round", self.leader_id, type(exc).__name__))
        if skipped is not None:  # Postgres away while refreshing, or a bug: say so, throttled
            log.warning(
                "replica fetch round failed; backing off",
                extra={"leader": self.leader_id, "error": repr(exc), "repeats_not_logged": skipped},
                exc_info=exc,
            )

    def _apply(
        self, replies: list[tuple[PartitionReply, memoryview]], states: list[Partition]
    ) -> bool:
        """Apply one response; True when metadata looks stale and should be refreshed."""
        stale = self._stalled = False
        for (reply, data), state in zip(replies, states, strict=True):
            if state.role is not Role.FOLLOWER or state.leader_id != self.leader_id:
                continue  # leadership moved while the fetch was in flight
            try:
                if reply.diverging_epoch >= 0 or reply.diverging_end_offset >= 0:
                    # Kafka: truncate to min(leader's end of the epoch, our own end of it),
                    # so frames from epochs the leader never had are removed too.
                    target = reply.diverging_end_offset
                    own = (
                        state.log.end_offset_for_epoch(reply.diverging_epoch)
                        if reply.diverging_epoch >= 0
                        else None
                    )
                    if own is not None:  # repeated answers converge on the common prefix
                        target = min(target, own[1])
                    if not state.truncate_to(target):
                        self._no_progress(state, reply, f"truncating to {target} changed nothing")
                elif reply.error_code == "OFFSET_OUT_OF_RANGE":
                    if state.log.log_end_offset < reply.log_start_offset:
                        state.restart_at(reply.log_start_offset)
                    elif not state.truncate_to(reply.log_end_offset):
                        self._no_progress(state, reply, "out of range, yet within the leader's log")
                elif reply.error_code is not None:
                    stale = True
                else:
                    state.append_replicated(data, reply.high_watermark, reply.log_start_offset)
            except Exception as exc:
                where = {"topic": state.topic, "partition": state.partition}
                log_failure(log, "applying replicated data failed", exc, where)
                stale = True
        return stale

    def _no_progress(self, state: Partition, reply: PartitionReply, why: str) -> None:
        """The leader's answer, applied, left the log as it was: asking again loops."""
        self._stalled = True
        skipped = _THROTTLE.allow((state.topic_id, state.partition, reply.leader_epoch))
        if skipped is None:
            return
        log.warning(
            "follower makes no progress; backing off",
            extra={
                "topic": state.topic,
                "partition": state.partition,
                "leader": self.leader_id,
                "why": why,
                "leader_answer": {
                    "error": reply.error_code,
                    "diverging_epoch": reply.diverging_epoch,
                    "diverging_end_offset": reply.diverging_end_offset,
                    "log_start_offset": reply.log_start_offset,
                    "log_end_offset": reply.log_end_offset,
                },
                "log_end_offset": state.log.log_end_offset,
                "epochs": state.log.leader_epochs()[-3:],
                "repeats_not_logged": skipped,
            },
        )
