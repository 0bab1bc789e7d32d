"""Consumer groups over HTTP against real broker processes (docs/design.md §1, §5): any broker
answers
any member; partitions move on leave and on session expiry but never have two owners; stale
epochs are fenced; committed offsets survive restarts; resets only on empty groups."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from itertools import cycle
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for
from tests.integration.group_ownership import (
    Ownership,
    SessionLapsed,
    assert_never_two_owners,
)

PARTITIONS = 6
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def cluster(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    c = Cluster(db_factory(), Path(tmp_path_factory.mktemp("groups")), 3).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def topic(cluster: Cluster) -> str:
    b = cluster.any()
    r = b.http.post("/topics", json={"name": "orders", "partitions": PARTITIONS})
    assert r.status_code == 201, r.text
    # Ten records per partition, so lag and resets have something to measure.
    for p in range(PARTITIONS):
        recs = [
            {"value": f"v{p}-{i}", "partition": p, "timestamp": 1000 * (i + 1)} for i in range(10)
        ]
        wait_for(
            "produce",
            lambda recs=recs: (
                b.http.post("/topics/orders/records", json={"records": recs}).status_code == 200
            ),
        )
    return "orders"


def ok(r: Any, status: int = 200) -> dict[str, Any]:
    assert r.status_code == status, r.text
    return dict(r.json())


def error(r: Any, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["error_code"] == code, r.text


def tps(assignment: dict[str, list[int]]) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


class Member:
    """A well-behaved member: consumes what the last answer gave it, reports it as owned."""

    def __init__(self, brokers: list[BrokerProcess], group: str, topics: list[str], **join: Any):
        self.brokers = cycle(brokers)  # every request goes to the next broker
        self.group = group
        self.join_body = {"topics": topics, **join}
        self.rejoin()

    def rejoin(self) -> None:
        """Join (again, after a lapsed session: as a new member that owns nothing yet)."""
        self.join_sent = time.monotonic()
        doc = ok(self._post(f"/groups/{self.group}/members", self.join_body))
        self.join_got = time.monotonic()
        self.id = doc["member_id"]
        self.epoch = doc["member_epoch"]
        self.interval_ms = doc["heartbeat_interval_ms"]
        self.owned = tps(doc["assignment"])

    def beat(self) -> dict[str, Any]:
        owned: dict[str, list[int]] = {}
        for t, p in sorted(self.owned):
            owned.setdefault(t, []).append(p)
        r = self._post(
            f"/groups/{self.group}/members/{self.id}/heartbeat",
            {"member_epoch": self.epoch, "owned": owned},
        )
        if r.status_code == 409 and r.json()["error_code"] == "UNKNOWN_MEMBER_ID":
            raise SessionLapsed(r.text)
        doc = ok(r)
        self.epoch, self.owned = doc["member_epoch"], tps(doc["assignment"])
        return doc

    def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST through the next broker, and once more through the one after if the connection
        failed (a broker that woke from a stall may close a kept-alive connection as a request
        arrives on it). Safe to resend: the coordinator accepts a heartbeat at the previous
        epoch, for an answer that was lost; a join whose answer was lost leaves a member that
        never beats, so it lapses."""
        try:
            return next(self.brokers).http.post(path, json=body)
        except httpx.TransportError:
            return next(self.brokers).http.post(path, json=body)

    def commit(self, offsets: dict[tuple[str, int], int], epoch: int | None = None) -> Any:
        body = {
            "member_id": self.id,
            "member_epoch": self.epoch if epoch is None else epoch,
            "offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()],
        }
        return next(self.brokers).http.post(f"/groups/{self.group}/offsets", json=body)

    def leave(self) -> None:
        ok(next(self.brokers).http.delete(f"/groups/{self.group}/members/{self.id}"))


def settle(members: list[Member], rounds: int = 4) -> None:
    for _ in range(rounds):
        for m in members:
            m.beat()


def all_partitions(topic: str) -> set[tuple[str, int]]:
    return {(topic, p) for p in range(PARTITIONS)}


def test_join_heartbeat_leave_through_any_broker(cluster: Cluster, topic: str) -> None:
    brokers = list(cluster.brokers.values())
    a = Member(brokers, "g-basic", [topic], assignor="cooperative-sticky")
    assert a.owned == all_partitions(topic) and a.interval_ms > 0
    b = Member(brokers[1:], "g-basic", [topic])
    assert b.owned == set()  # all still a's until a gives some up
    settle([a, b])
    assert len(a.owned) == len(b.owned) == 3 and a.owned | b.owned == all_partitions(topic)
    for via in brokers:  # every broker describes the same group
        doc = ok(via.http.get("/groups/g-basic"))
        assert doc["state"] == "stable" and doc["assignor"] == "cooperative-sticky"
        assert {m["member_id"]: tps(m["assignment"]) for m in doc["members"]} == {
            a.id: a.owned,
            b.id: b.owned,
        }
    listed = {g["name"]: g for g in ok(brokers[2].http.get("/groups"))["groups"]}
    assert listed["g-basic"]["members"] == 2
    a.leave()
    b.beat()
    assert b.owned == all_partitions(topic)
    error(brokers[0].http.delete(f"/groups/g-basic/members/{a.id}"), 409, "UNKNOWN_MEMBER_ID")


def test_errors_are_kafka_names_with_http_statuses(cluster: Cluster, topic: str) -> None:
    http = cluster.any().http
    error(http.get("/groups/no-such-group"), 404, "GROUP_ID_NOT_FOUND")
    error(http.post("/groups/g-err/members", json={"topics": []}), 400, "INVALID_REQUEST")
    error(
        http.post("/groups/g-err/members", json={"topics": ["a b"]}), 400, "INVALID_TOPIC_EXCEPTION"
    )
    error(
        http.post("/groups/g-err/members", json={"topics": [topic], "assignor": "fair"}),
        400,
        "UNSUPPORTED_ASSIGNOR",
    )
    error(
        http.post("/groups/g-err/members/nobody/heartbeat", json={"member_epoch": 1}),
        409,
        "UNKNOWN_MEMBER_ID",
    )
    m = Member([cluster.any()], "g-err", [topic])
    r = cluster.any().http.post(
        f"/groups/g-err/members/{m.id}/heartbeat", json={"member_epoch": m.epoch + 5}
    )
    error(r, 409, "FENCED_MEMBER_EPOCH")
    error(http.post("/groups/g-err/offsets", content=b"{", headers=JSON), 400, "INVALID_REQUEST")
    m.leave()


def test_a_silent_member_loses_its_partitions_to_the_others_never_to_two_at_once(
    cluster: Cluster, topic: str
) -> None:
    """Three members heartbeat from threads, each through every broker in turn; one stops.
    Ownership intervals per partition (see Ownership) must never overlap between members.
    A loaded machine may delay a live member's heartbeats past its session: it then rejoins
    as a KIP-848 consumer does (see SessionLapsed), and the checks still hold."""
    session_ms = 1500
    brokers = list(cluster.brokers.values())
    members = [
        Member(brokers[i:] + brokers[:i], "g-expiry", [topic], session_timeout_ms=session_ms)
        for i in range(3)
    ]
    live, silent = members[:2], members[2]
    ownership = Ownership(session_ms)
    threads = [
        threading.Thread(target=ownership.run, args=(m, 3.0 if m is silent else None))
        for m in members
    ]

    def moved() -> bool:
        ownership.raise_errors()
        a, b = (m.owned for m in live)
        return (
            ownership.silent_deadline < float("inf")
            and a | b == all_partitions(topic)
            and len(a) == len(b) == 3
        )

    for t in threads:
        t.start()
    try:
        wait_for("the silent member's partitions to move to the others", moved, timeout=30)
        beats = ownership.beats
        # Some more heartbeats in the settled group, for overlaps to show if there are any.
        wait_for("more heartbeats", lambda: moved() and ownership.beats >= beats + 4)
        doc = ok(cluster.any().http.get("/groups/g-expiry"))
        assert silent.id not in {m["member_id"] for m in doc["members"]}
        r = cluster.any().http.post(
            f"/groups/g-expiry/members/{silent.id}/heartbeat", json={"member_epoch": silent.epoch}
        )
        error(r, 409, "UNKNOWN_MEMBER_ID")
    finally:
        ownership.stop.set()
        for t in threads:
            t.join()
    assert not ownership.errors, ownership.errors
    assert_never_two_owners(ownership.intervals)
    for m in live:  # its session may have lapsed since its thread stopped: gone already
        r = next(m.brokers).http.delete(f"/groups/g-expiry/members/{m.id}")
        assert r.status_code == 200 or r.json()["error_code"] == "UNKNOWN_MEMBER_ID", r.text


def test_commits_are_fenced_and_offsets_report_lag(cluster: Cluster, topic: str) -> None:
    brokers = list(cluster.brokers.values())
    a = Member(brokers, "g-commit", [topic])
    first_epoch = a.epoch
    b = Member(brokers, "g-commit", [topic])
    settle([a, b])
    assert a.epoch > first_epoch
    mine = sorted(a.owned)[0]
    error(a.commit({mine: 4}, epoch=first_epoch), 409, "STALE_MEMBER_EPOCH")
    theirs = sorted(b.owned)[0]
    error(a.commit({theirs: 4}), 409, "STALE_MEMBER_EPOCH")
    error(
        brokers[0].http.post(
            "/groups/g-commit/offsets",
            json={
                "member_id": "ghost",
                "member_epoch": 1,
                "offsets": [{"topic": topic, "partition": 0, "offset": 1}],
            },
        ),
        409,
        "UNKNOWN_MEMBER_ID",
    )
    ok(a.commit({mine: 4}))
    ok(b.commit({theirs: 7}))
    for via in brokers:
        rows = {
            (r["topic"], r["partition"]): r
            for r in ok(via.http.get("/groups/g-commit/offsets"))["offsets"]
        }
        assert set(rows) == all_partitions(topic)  # subscribed partitions, committed or not
        assert (rows[mine]["offset"], rows[mine]["lag"], rows[mine]["high_watermark"]) == (4, 6, 10)
        assert (rows[theirs]["offset"], rows[theirs]["lag"]) == (7, 3)
        others = set(rows) - {mine, theirs}
        assert all(rows[tp]["offset"] is None and rows[tp]["lag"] is None for tp in others)
    doc = ok(brokers[1].http.get("/groups/g-commit"))
    assert doc["lag"] == 9
    a.leave()
    b.leave()


def test_delete_only_an_empty_group_and_its_offsets_go(cluster: Cluster, topic: str) -> None:
    http = cluster.any().http
    commit = {"offsets": [{"topic": topic, "partition": 0, "offset": 4}]}
    ok(http.post("/groups/g-delete/offsets", json=commit))  # an admin commit makes the group
    m = Member([cluster.any()], "g-delete", [topic])
    error(http.delete("/groups/g-delete"), 409, "NON_EMPTY_GROUP")
    assert ok(http.get("/groups/g-delete"))["members"]  # nothing changed
    m.leave()
    assert ok(http.delete("/groups/g-delete")) == {"deleted": "g-delete"}
    error(http.get("/groups/g-delete"), 404, "GROUP_ID_NOT_FOUND")
    error(http.delete("/groups/g-delete"), 404, "GROUP_ID_NOT_FOUND")
    assert "g-delete" not in [g["name"] for g in ok(http.get("/groups"))["groups"]]
    # A group of the same name starts afresh: no offsets survive the deletion.
    m = Member([cluster.any()], "g-delete", [topic])
    rows = ok(http.get("/groups/g-delete/offsets", params={"topic": topic}))["offsets"]
    assert {r["offset"] for r in rows} == {None}
    m.leave()


def test_reset_offsets_only_when_the_group_is_empty(cluster: Cluster, topic: str) -> None:
    http = cluster.any().http
    m = Member([cluster.any()], "g-reset", [topic])
    body = {"at": "earliest", "topics": [topic]}
    error(http.post("/groups/g-reset/offsets/reset", json=body), 409, "NON_EMPTY_GROUP")
    m.leave()

    def offsets() -> dict[int, int | None]:
        rows = ok(http.get("/groups/g-reset/offsets", params={"topic": topic}))["offsets"]
        return {r["partition"]: r["offset"] for r in rows}

    dry = ok(
        http.post("/groups/g-reset/offsets/reset", json={**body, "at": "latest", "dry_run": True})
    )
    assert dry["dry_run"] and {r["offset"] for r in dry["offsets"]} == {10}
    assert set(offsets().values()) == {None}  # a dry run writes nothing
    ok(http.post("/groups/g-reset/offsets/reset", json=body))
    assert offsets() == dict.fromkeys(range(PARTITIONS), 0)
    ok(http.post("/groups/g-reset/offsets/reset", json={"at": "latest"}))  # all committed
    assert offsets() == dict.fromkeys(range(PARTITIONS), 10)
    # Timestamps: record i of each partition has timestamp 1000 * (i + 1).
    scope = {"partitions": [{"topic": topic, "partition": 2}]}
    ok(http.post("/groups/g-reset/offsets/reset", json={"at": 3500, **scope}))
    assert offsets()[2] == 3
    ok(http.post("/groups/g-reset/offsets/reset", json={"at": 10**12, **scope}))
    assert offsets()[2] == 10  # past every record: the end, as Kafka resets
    explicit = {"offsets": [{"topic": topic, "partition": 1, "offset": 5}]}
    ok(http.post("/groups/g-reset/offsets/reset", json=explicit))
    assert offsets()[1] == 5
    # Outside the log: clamped to its end (10), as Kafka's reset tool does.
    beyond = {"offsets": [{"topic": topic, "partition": 1, "offset": 99}]}
    assert ok(http.post("/groups/g-reset/offsets/reset", json=beyond))["offsets"][0]["offset"] == 10
    assert offsets()[1] == 10
    missing = {"offsets": [{"topic": topic, "partition": 99, "offset": 0}]}
    error(
        http.post("/groups/g-reset/offsets/reset", json=missing), 404, "UNKNOWN_TOPIC_OR_PARTITION"
    )
    error(
        http.post("/groups/g-reset/offsets/reset", json={"at": "earliest", "topics": ["nope"]}),
        404,
        "UNKNOWN_TOPIC_OR_PARTITION",
    )


def test_describe_gives_lag_in_time_per_partition(cluster: Cluster, topic: str) -> None:
    """lag_ms is the age of the record at the committed offset (the oldest unconsumed one),
    read from whichever broker leads the partition; 0 when caught up; null if uncommitted."""
    http = cluster.any().http
    at = {"offsets": [{"topic": topic, "partition": p, "offset": o} for p, o in ((0, 3), (1, 10))]}
    ok(http.post("/groups/g-age/offsets/reset", json=at))
    before = int(time.time() * 1000)
    doc = ok(cluster.any(exclude=1).http.get("/groups/g-age"))
    after = int(time.time() * 1000)
    rows = {r["partition"]: r for r in doc["offsets"]}
    assert rows[0]["lag"] == 7 and rows[1]["lag"] == 0
    # Record 3 of each partition has timestamp 4000 (the fixture's 1000 * (i + 1)).
    assert before - 4000 <= rows[0]["lag_ms"] <= after - 4000
    assert rows[1]["lag_ms"] == 0
    assert doc["lag_ms"] == rows[0]["lag_ms"]  # the group's: its oldest unconsumed record
    plain = ok(http.get("/groups/g-age/offsets"))["offsets"]
    assert {r["lag_ms"] for r in plain} == {None}  # only describe reads record timestamps


def test_committed_offsets_survive_broker_restarts(cluster: Cluster, topic: str) -> None:
    m = Member(list(cluster.brokers.values()), "g-durable", [topic])
    ok(m.commit(dict.fromkeys(sorted(m.owned), 8)))
    m.leave()
    for b in cluster.brokers.values():
        b.restart()
    wait_for(
        "brokers back",
        lambda: all(x["alive"] for x in cluster.any().http.get("/brokers").json()["brokers"]),
    )
    rows = ok(cluster.any().http.get("/groups/g-durable/offsets"))["offsets"]
    assert {(r["partition"], r["offset"]) for r in rows} == {(p, 8) for p in range(PARTITIONS)}
