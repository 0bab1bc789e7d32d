"""The consumer's bookkeeping: positions and epochs, the record buffer, and group membership
(join, heartbeats, fencing and rejoining) against a scripted group."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import orjson
import pyarrow as pa
import pytest

from logformat.schema import CONSUMER_SCHEMA
from tierlog.client.buffer import Chunk, RecordBuffer
from tierlog.client.config import ConsumerConfig
from tierlog.client.consumer_records import ConsumerRecord, RecordRows
from tierlog.client.errors import CommitFailedError
from tierlog.client.group import GroupMember
from tierlog.client.http import AsyncHttp, Endpoints
from tierlog.client.subscription import SubscriptionState
from tierlog.client.types import OffsetAndMetadata, TopicPartition

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def records(tp: TopicPartition, offsets: range) -> RecordRows:
    n = len(offsets)
    table = pa.table(
        {
            "offset": pa.array(offsets, pa.int64()),
            "timestamp": pa.array([0] * n, pa.int64()).cast(CONSUMER_SCHEMA.field(1).type),
            "key": pa.nulls(n, pa.binary()),
            "value": pa.array([b"%d" % o for o in offsets], pa.binary()),
            "headers": pa.nulls(n, CONSUMER_SCHEMA.field(4).type),
        },
        schema=CONSUMER_SCHEMA,
    )
    return RecordRows(tp.topic, tp.partition, table)


def drain(buf: RecordBuffer, sub: SubscriptionState, limit: int) -> list[ConsumerRecord]:
    return [r for s in buf.take(sub, limit) for r in s.rows.records(s.start, s.end)]


def test_buffer_hands_out_in_order_and_advances_positions() -> None:
    sub = SubscriptionState()
    sub.assign([A0, A1])
    sub.seek(A0, 0)
    sub.seek(A1, 10)
    buf = RecordBuffer()
    buf.add(A0, Chunk(sub.state(A0).epoch, records(A0, range(0, 5)), next_offset=7))
    buf.add(A1, Chunk(sub.state(A1).epoch, records(A1, range(10, 12)), next_offset=12))
    first = drain(buf, sub, limit=3)
    assert len(first) == 3
    rest = drain(buf, sub, limit=100)
    got = first + rest
    assert [r.offset for r in got if r.partition == 0] == [0, 1, 2, 3, 4]
    assert [r.offset for r in got if r.partition == 1] == [10, 11]
    # A fully handed-out chunk moves the position to its next offset (past compacted gaps).
    assert sub.positions() == {A0: 7, A1: 12}


def test_a_seek_makes_buffered_records_stale() -> None:
    sub = SubscriptionState()
    sub.assign([A0])
    sub.seek(A0, 0)
    buf = RecordBuffer()
    buf.add(A0, Chunk(sub.state(A0).epoch, records(A0, range(0, 5)), next_offset=5))
    sub.seek(A0, 100)
    assert drain(buf, sub, limit=10) == []
    assert sub.positions() == {A0: 100}


def test_paused_partitions_keep_their_records_for_later() -> None:
    sub = SubscriptionState()
    sub.assign([A0])
    sub.seek(A0, 0)
    buf = RecordBuffer()
    buf.add(A0, Chunk(sub.state(A0).epoch, records(A0, range(0, 2)), next_offset=2))
    sub.state(A0).paused = True
    assert drain(buf, sub, limit=10) == [] and sub.fetchable() == []
    sub.state(A0).paused = False
    assert [r.offset for r in drain(buf, sub, limit=10)] == [0, 1]


def test_subscribe_and_assign_do_not_mix() -> None:
    sub = SubscriptionState()
    sub.subscribe(["a"])
    with pytest.raises(ValueError):
        sub.assign([A0])
    sub.unsubscribe()
    sub.assign([A0])
    with pytest.raises(ValueError):
        sub.subscribe(["a"])


class ScriptedGroup:
    """Answers like fetch/groups: join hands out epoch 1; a heartbeat at a wrong epoch is
    FENCED_MEMBER_EPOCH until the member rejoins at epoch 0."""

    def __init__(self) -> None:
        self.fence_next = False
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.epoch = 0

    def reply(self, doc: dict[str, Any], status: int = 200) -> httpx.Response:
        return httpx.Response(status, content=orjson.dumps(doc))

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content) if request.content else {}
        path = request.url.path
        self.calls.append((path, body))
        assignment = {"a": [0, 1]}
        if path == "/groups/g/members":
            self.epoch = 1
            return self.reply(
                {
                    "member_id": "m1",
                    "member_epoch": 1,
                    "heartbeat_interval_ms": 50,
                    "assignment": assignment,
                }
            )
        if path.endswith("/heartbeat"):
            if body["member_epoch"] == 0:
                self.epoch += 1
                return self.reply(
                    {
                        "member_epoch": self.epoch,
                        "heartbeat_interval_ms": 50,
                        "assignment": assignment,
                    }
                )
            if self.fence_next:
                self.fence_next = False
                return self.reply({"error_code": "FENCED_MEMBER_EPOCH", "message": "x"}, 409)
            return self.reply(
                {"member_epoch": self.epoch, "heartbeat_interval_ms": 50, "assignment": assignment}
            )
        if path == "/groups/g/offsets":
            if body["member_id"] != "m1" or body["member_epoch"] != self.epoch:
                return self.reply({"error_code": "STALE_MEMBER_EPOCH", "message": "x"}, 409)
            return self.reply({"offsets": body["offsets"]})
        return self.reply({"error_code": "NOT_FOUND", "message": path}, 404)


async def _until(check: Any, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_membership_heartbeats_reports_owned_and_rejoins_after_a_fence() -> None:
    group = ScriptedGroup()

    async def scenario() -> None:
        http = AsyncHttp(
            Endpoints("http://fake"), timeout_s=5, transport=httpx.MockTransport(group.handle)
        )
        member = GroupMember(http, "g", ConsumerConfig(group_id="g", session_timeout_ms=3000))
        await member.join(["a"])
        assert member.joined and member.assignment == frozenset({A0, A1})
        assert member.interval_s == 0.05
        member.owned = frozenset({A0, A1})
        await _until(lambda: sum(p.endswith("/heartbeat") for p, _ in group.calls) >= 2)
        beat = [b for p, b in group.calls if p.endswith("/heartbeat")][-1]
        assert beat == {"member_epoch": 1, "owned": {"a": [0, 1]}}
        await member.commit({A0: OffsetAndMetadata(3)})  # at the current epoch
        group.fence_next = True
        await _until(lambda: member.lost is not None)
        assert not member.joined
        with pytest.raises(CommitFailedError):
            await member.commit({A0: OffsetAndMetadata(4)})
        # The consumer drops its partitions (on_partitions_lost), then rejoins: same id,
        # epoch 0, owning nothing.
        member.lost = None
        await member.join(["a"])
        rejoin = [b for p, b in group.calls if p.endswith("/heartbeat")][-1]
        assert rejoin == {"member_epoch": 0, "owned": {}, "topics": ["a"]}
        assert member.member_id == "m1" and member.member_epoch == 2
        await member.leave()
        assert group.calls[-1][0] == "/groups/g/members/m1"
        await http.aclose()

    asyncio.run(scenario())
