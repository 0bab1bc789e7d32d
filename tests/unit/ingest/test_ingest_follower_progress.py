"""A follower whose leader's answer changes nothing says why, once in a while, and backs off
(issue 12, found 1: a divergence answer repeated forever, hundreds of log lines a second)."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from sqlalchemy.exc import OperationalError

from ingest import log_throttle
from ingest.log_throttle import LogThrottle
from ingest.replication.partition import Partition, Role
from ingest.replication.replica_fetcher import ReplicaFetcher
from ingest.replication.wire import PartitionReply, encode_response
from metadata.types import PartitionRecord, TopicNamePartition


def test_throttle_writes_once_per_interval_and_counts_the_rest(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    now = [100.0]
    monkeypatch.setattr(log_throttle.time, "monotonic", lambda: now[0])
    throttle = LogThrottle(every_s=10, max_keys=2)
    assert throttle.allow("a") == 0
    assert [throttle.allow("a") for _ in range(5)] == [None] * 5
    assert throttle.allow("b") == 0  # keys are independent
    now[0] += 10
    assert throttle.allow("a") == 5  # the lines left out in between
    assert throttle.allow("c") == 0  # over max_keys: forgets, stays bounded
    assert len(throttle._last) <= 2


def _follower(env, frame) -> Partition:  # type: ignore[no-untyped-def]
    log = env.open()
    log.append([frame(3)], leader_epoch=0, now_ms=1)
    state = Partition(log, me=2)
    state.apply(PartitionRecord("orders", env.topic_id, 0, 1, 1, [1, 2, 3], [1, 2, 3], 1))
    assert state.role is Role.FOLLOWER
    return state


def _diverging(epoch: int, end: int) -> PartitionReply:
    return PartitionReply(
        topic="orders",
        partition=0,
        error_code=None,
        message=None,
        high_watermark=3,
        log_start_offset=0,
        log_end_offset=3,
        leader_epoch=1,
        diverging_epoch=epoch,
        diverging_end_offset=end,
        length=0,
    )


def test_an_answer_that_changes_nothing_stalls_the_loop_and_is_logged_once(
    env, frame, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        state = _follower(env, frame)
        fetcher = ReplicaFetcher(2, 1, lambda: None, lambda: "", asyncio.sleep)
        try:
            with caplog.at_level(logging.INFO, logger="tierlog"):
                for _ in range(50):
                    fetcher._apply([(_diverging(0, 3), memoryview(b""))], [state])
                    assert fetcher._stalled
            lines = [r for r in caplog.records if "no progress" in r.getMessage()]
            assert len(lines) == 1, [r.getMessage() for r in caplog.records]
            assert not [r for r in caplog.records if "truncated divergent" in r.getMessage()]
            assert state.log.log_end_offset == 3  # nothing was lost either
            # An answer that does change the log is progress again.
            fetcher._apply([(_diverging(0, 1), memoryview(b""))], [state])
            assert not fetcher._stalled and state.log.log_end_offset == 0
        finally:
            await fetcher._transport.aclose()

    asyncio.run(run())


def test_a_failed_metadata_refresh_backs_the_loop_off_and_never_ends_it(env, frame) -> None:  # type: ignore[no-untyped-def]
    """CI chaos seed 2486818428: Postgres was away when a leader's answer asked for fresh
    metadata; the refresh raised out of the fetch loop, which ended silently, and the follower
    stayed out of every ISR of that leader for good. The loop must survive it and fetch on."""

    async def run() -> None:
        state = _follower(env, frame)
        asked: list[int] = []
        refreshes: list[int] = []

        def leader(request: httpx.Request) -> httpx.Response:
            asked.append(1)
            reply = _diverging(-1, -1)._replace(error_code="NOT_LEADER_OR_FOLLOWER")
            return httpx.Response(200, content=encode_response([reply], [b""]))

        async def refresh() -> None:
            refreshes.append(1)
            if len(refreshes) <= 3:  # Postgres away for the first three
                raise OperationalError("SELECT", {}, ConnectionError("server closed"))

        def link() -> httpx.AsyncBaseTransport:
            return httpx.MockTransport(leader)

        fetcher = ReplicaFetcher(2, 1, lambda: "http://leader", lambda: "", refresh, link)
        fetcher.partitions = {TopicNamePartition("orders", 0): state}
        fetcher.start()
        try:
            for _ in range(200):
                if len(refreshes) > 5:
                    break
                await asyncio.sleep(0.02)
            assert len(refreshes) > 5, (len(asked), len(refreshes))
            assert fetcher.alive
        finally:
            await fetcher.stop()

    asyncio.run(run())
