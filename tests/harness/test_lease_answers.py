"""What a leader whose lease lapsed answers for a write it had already taken (issue 26): the
answer must say what became of the write, whoever leads by the time it is sent.

- An acks=1 write taken just before the leader was paused past its lease, and answered after
  it, when another leader lacking it had been elected: answered success, it was an
  acknowledged record lost (tests/integration/test_preferred_leader.py, "1 acknowledged acks=1
  records lost"). It must be NOT_LEADER_OR_FOLLOWER: it may or may not survive.
- An acks=all write replicated to the whole ISR while the leader's lease was in doubt, whose
  leader was then replaced: answered NOT_LEADER_OR_FOLLOWER, librdkafka sent it again under a
  bumped producer epoch and it was written twice (the 14-minute soak's duplicate). It is
  committed (every electable replica holds it), so it must be success, at its offsets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

import httpx
import pyarrow as pa

from ingest.replication.partition import AppendResult
from logformat.errors import ErrorCode, TierlogError
from logformat.frame import encode_frame
from logformat.schema import HEADERS, RECORD_SCHEMA, TIMESTAMP
from metadata.types import TopicNamePartition
from tests.harness.cluster import InProcessCluster
from tests.harness.links import CURRENT_BROKER, host_of
from tests.harness.node import LEASE_MS, Node
from tests.integration.cluster import wait_for

LEASE_S = LEASE_MS / 1000
T = TypeVar("T")


def _frame(value: bytes) -> bytearray:
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([0], pa.int32()),
            pa.array([1_000], TIMESTAMP),
            pa.array([None], pa.binary()),
            pa.array([value], pa.binary()),
            pa.array([None], HEADERS),
        ],
        schema=RECORD_SCHEMA,
    )
    return encode_frame(batch)


def _on_loop(node: Node, coro: Coroutine[Any, Any, T]) -> Future[T]:
    """Start `coro` on the harness loop as `node`'s work, without waiting for it."""

    async def as_node() -> T:
        CURRENT_BROKER.set(node.broker_id)
        return await coro

    return asyncio.run_coroutine_threadsafe(as_node(), node.loop.loop)


async def _post(node: Node, path: str, params: dict[str, str], body: object) -> httpx.Response:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(node.app),
        base_url=f"http://{host_of(node.broker_id)}",
        timeout=30,
    ) as client:
        return await client.post(path, params=params, json=body)


def _new_leader(c: InProcessCluster, topic: str, old: Node) -> int:
    other = c.any(exclude=old.broker_id)
    return int(
        wait_for(
            "a new leader",
            lambda: (
                (ld := c.partition(topic, via=other)["leader"]) not in (None, old.broker_id) and ld
            ),
            timeout=30,
        )
    )


def _rejoin(c: InProcessCluster, old: Node) -> None:
    """Every link back; the old leader's next heartbeat finds its lease lapsed, registers
    again and reads that it follows now."""
    c.heal()
    old.run(old.b.lease.heartbeat())


def test_an_acks_1_write_answered_after_a_pause_past_the_lease_is_not_acknowledged(
    cluster: InProcessCluster,
) -> None:
    c = cluster
    c.create_topic("paused", min_insync_replicas=1)
    c.produce("paused", [{"value": "a"}])
    old = c.leader("paused")
    state = old.b.partitions[TopicNamePartition("paused", 0)]
    c.isolate(old.broker_id)  # its followers stop fetching: the write stays on it alone

    async def write() -> asyncio.Future[list[AppendResult]]:
        queued = state.submit([_frame(b"taken-before-the-pause")], 1, 1)
        await asyncio.wait([queued])  # written to its log ...
        return queued

    queued = old.run(write())
    # ... then the broker is paused before it answers: its clock jumps past its lease, and
    # the controller elects a follower that never had the write.
    c.advance(LEASE_S)
    new = _new_leader(c, "paused", old)
    answer = _on_loop(old, state.completed(queued, 1, 1, 30))
    _rejoin(c, old)
    try:
        results = answer.result(30)
    except TierlogError as exc:
        assert exc.code is ErrorCode.NOT_LEADER_OR_FOLLOWER, exc
    else:
        raise AssertionError(f"acknowledged a write its replaced leader alone had: {results}")
    values = [r["value"] for r in c.brokers[new].fetch_all("paused")]
    assert values == ["a"], values  # what an acknowledgement would have lost


def test_a_committed_write_whose_leader_was_replaced_in_doubt_is_acknowledged(
    cluster: InProcessCluster,
) -> None:
    c = cluster
    c.create_topic("doubted", min_insync_replicas=2)
    c.produce("doubted", [{"value": "a"}])
    old = c.leader("doubted")
    state = old.b.partitions[TopicNamePartition("doubted", 0)]
    followers = [i for i in c.brokers if i != old.broker_id]
    c.cut_postgres(old.broker_id)
    for f in followers:  # held back until the lease is in doubt
        c.cut(old.broker_id, f)
    body = {"records": [{"value": "committed-in-doubt", "partition": 0}]}
    answer = _on_loop(old, _post(old, "/topics/doubted/records", {"acks": "all"}, body))
    wait_for("the write on the leader", lambda: state.log.log_end_offset == 2)
    c.advance(LEASE_S * 0.8 + 0.6)  # past its own view of the lease, within the database's
    assert not old.b.lease_ok()

    async def restore() -> None:
        for f in followers:
            c.links.restore(old.broker_id, f)

    c.loop.run(restore())
    wait_for("replicated to the ISR", lambda: state.high_watermark == 2)
    assert not answer.done(), answer.result()  # committed, but is it still the leader?
    c.advance(LEASE_S * 0.2)  # the database's lease lapses: a follower holding it is elected
    new = _new_leader(c, "doubted", old)

    async def learn_it_follows() -> None:
        # Postgres back, its lease still lapsed: it reads the new leader (as the metadata
        # listener's NOTIFY delivers it) before its heartbeat has registered it again.
        old.to_postgres.restore()
        await old.b.metadata.refresh_now()

    old.run(learn_it_follows())
    r = answer.result(30)
    assert r.status_code == 200, r.text
    assert r.json()["offsets"][0]["offset"] == 1, r.text  # the write's own offset
    values = [x["value"] for x in c.brokers[new].fetch_all("doubted")]
    assert values == ["a", "committed-in-doubt"], values
