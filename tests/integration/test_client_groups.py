"""Consumer groups through the Python client against real brokers: partitions split between
members and handed over with the listener callbacks, commits, and rejoining after a fence."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for
from tierlog import Admin, CommitFailedError, Consumer, ConsumerRebalanceListener, Producer
from tierlog.client import TopicPartition

FAST: dict[str, Any] = {
    "session_timeout_ms": 3000,
    "auto_offset_reset": "earliest",
    "fetch_max_wait_ms": 200,
}


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module: each test has its own topics and groups."""
    return module_broker


class Recorder(ConsumerRebalanceListener):
    def __init__(self, consumer: Consumer | None = None) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []
        self.consumer = consumer
        self.positions_at_revoke: dict[TopicPartition, int] = {}

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("revoked", set(partitions)))
        if self.consumer is not None:  # still readable while being revoked
            for tp in partitions:
                self.positions_at_revoke[tp] = self.consumer.position(tp)

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("assigned", set(partitions)))

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("lost", set(partitions)))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]


def poll_until(
    consumers: list[Consumer],
    done: Callable[[], bool],
    sink: list[Any] | None = None,
    timeout: float = 30,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            records = c.poll(0.1)
            if sink is not None:
                sink.extend(records)
        if done():
            return
    raise AssertionError("condition not reached in time")


def produce(url: str, topic: str, start: int, count: int) -> None:
    with Producer(url, linger_ms=1) as producer:
        for i in range(start, start + count):
            producer.send(topic, b"r%d" % i, key=b"k%d" % i)


def test_two_members_split_the_partitions_and_hand_them_over(broker: BrokerProcess) -> None:
    broker.create_topic("orders", partitions=4)
    produce(broker.url, "orders", 0, 200)
    every = {TopicPartition("orders", p) for p in range(4)}
    seen: list[Any] = []
    c1 = Consumer(broker.url, group_id="billing", **FAST)
    l1 = Recorder(c1)
    c1.subscribe(["orders"], listener=l1)
    poll_until([c1], lambda: c1.assignment() == every, seen)
    assert l1.events[0] == ("assigned", every)

    c2 = Consumer(broker.url, group_id="billing", **FAST)
    l2 = Recorder()
    c2.subscribe("orders", listener=l2)
    poll_until(
        [c1, c2],
        lambda: len(c1.assignment()) == 2 and len(c2.assignment()) == 2,
        seen,
    )
    assert c1.assignment() | c2.assignment() == every
    assert not c1.assignment() & c2.assignment()  # never one partition in two members
    revoked = [tps for kind, tps in l1.events if kind == "revoked"]
    assert revoked and set().union(*revoked) == c2.assignment()
    assert set().union(*(t for k, t in l2.events if k == "assigned")) == c2.assignment()

    produce(broker.url, "orders", 200, 200)
    poll_until([c1, c2], lambda: len(seen) >= 400, seen)
    values = [r.value for r in seen]
    assert sorted(values) == sorted(b"r%d" % i for i in range(400))  # each exactly once

    c2.close()  # leaves the group: its partitions go back to c1
    poll_until([c1], lambda: c1.assignment() == every)
    assert l2.kinds()[-1] == "revoked"
    c1.commit()
    with Admin(broker.url) as admin:
        offsets = admin.list_group_offsets("billing")
        assert sum(o.offset for o in offsets.values()) == 400
        assert all(o.lag == 0 for o in offsets.values())
        described = admin.describe_group("billing")
        assert len(described.members) == 1 and described.members[0].assignment == every
    c1.close()


def test_a_new_member_resumes_from_the_committed_offsets(broker: BrokerProcess) -> None:
    broker.create_topic("events", partitions=2)
    produce(broker.url, "events", 0, 50)
    first: list[Any] = []
    with Consumer(broker.url, group_id="g", enable_auto_commit=False, **FAST) as c:
        c.subscribe(["events"])
        poll_until([c], lambda: len(first) >= 50, first)
        c.commit_async(callback=lambda offsets, error: first.append(("cb", offsets, error)))
        poll_until([c], lambda: isinstance(first[-1], tuple))
    _, committed, error = first.pop()
    assert error is None and sum(o.offset for o in committed.values()) == 50
    produce(broker.url, "events", 50, 10)
    later: list[Any] = []
    with Consumer(broker.url, group_id="g", **FAST) as c:
        c.subscribe(["events"])
        poll_until([c], lambda: len(later) >= 10, later)
        assert c.committed([TopicPartition("events", p) for p in range(2)]) == {
            TopicPartition("events", p): committed[TopicPartition("events", p)] for p in range(2)
        }
    assert sorted(r.value for r in later) == sorted(b"r%d" % i for i in range(50, 60))


class Blackhole(httpx.AsyncBaseTransport):
    """Passes requests on, except heartbeats while `silent`: the member goes quiet."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.silent = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.silent and request.url.path.endswith("/heartbeat"):
            raise httpx.ConnectError("blackholed", request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _member_ids(broker: BrokerProcess, group: str) -> set[str]:
    r = broker.http.get(f"/groups/{group}")
    assert r.status_code == 200, r.text
    return {m["member_id"] for m in r.json()["members"]}


def test_a_member_that_lost_its_session_gets_lost_callbacks_and_rejoins(
    broker: BrokerProcess,
) -> None:
    broker.create_topic("jobs", partitions=2)
    produce(broker.url, "jobs", 0, 10)
    transport = Blackhole()
    c = Consumer(broker.url, group_id="workers", transport=transport, **FAST)
    listener = Recorder()
    c.subscribe(["jobs"], listener=listener)
    got: list[Any] = []
    poll_until([c], lambda: len(got) >= 10, got)
    assert c._member is not None
    old_member = c._member.member_id
    transport.silent = True
    # Past the session timeout the group removes the member: wait until it has (a fixed
    # sleep either wasted time or, under load, ended before the broker's sweep).
    wait_for(
        "the silent member removed from the group",
        lambda: old_member not in _member_ids(broker, "workers"),
    )
    with pytest.raises(CommitFailedError):
        c.commit()
    transport.silent = False
    poll_until([c], lambda: "lost" in listener.kinds() and len(c.assignment()) == 2)
    assert c._member is not None and c._member.member_id != old_member  # a new member
    lost = [tps for kind, tps in listener.events if kind == "lost"]
    assert lost == [{TopicPartition("jobs", 0), TopicPartition("jobs", 1)}]
    assert listener.kinds()[-1] == "assigned"
    produce(broker.url, "jobs", 10, 5)
    poll_until([c], lambda: len(got) >= 15, got)
    c.close()


def test_subscription_changes_go_through_heartbeats(broker: BrokerProcess) -> None:
    broker.create_topic("a", partitions=1)
    broker.create_topic("b", partitions=1)
    with Consumer(broker.url, group_id="switch", **FAST) as c:
        c.subscribe(["a"])
        poll_until([c], lambda: c.assignment() == {TopicPartition("a", 0)})
        c.subscribe(["b"])
        poll_until([c], lambda: c.assignment() == {TopicPartition("b", 0)})
        assert c.subscription() == {"b"}


def test_manual_assignment_commits_outside_membership(broker: BrokerProcess) -> None:
    broker.create_topic("simple", partitions=1)
    produce(broker.url, "simple", 0, 5)
    tp = TopicPartition("simple", 0)
    with Consumer(broker.url, group_id="tool", enable_auto_commit=False, **FAST) as c:
        c.assign([tp])
        poll_until([c], lambda: c.position(tp) == 5, [])
        c.commit()  # Kafka's simple consumer: allowed while the group has no members
        assert c.committed([tp]) == {tp: (5, "")}
        member = Consumer(broker.url, group_id="tool", **FAST)
        member.subscribe(["simple"])
        poll_until([member], lambda: member.assignment() == {tp})
        with pytest.raises(CommitFailedError):
            c.commit({tp: 1})  # the group has a member now: it owns the offsets
        member.close()
