"""Authorization on a real broker with auth on: every public endpoint checks Kafka-style
ACLs; denied calls are 403 and change nothing; prefixes, deny-overrides-allow, wildcards;
listings and describes leak nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.secured import Secured, secure_broker, started

Env = tuple[BrokerProcess, Secured, httpx.Client]
T, G, C = "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"
REC = {"records": [{"value": "x"}]}


@pytest.fixture(scope="module")
def env(db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    url = db_factory()
    sec = Secured(url)
    broker = secure_broker(url, Path(tmp_path_factory.mktemp("acls")) / "data")
    for b in started(broker):
        admin = sec.client(b.url, "admin")
        for name in ("events", "alice-secret"):
            assert admin.post("/topics", json={"name": name}).status_code == 201
        assert admin.post("/topics/events/records", json=REC).status_code == 200
        commit = {"offsets": [{"topic": "events", "partition": 0, "offset": 1}]}
        assert admin.post("/groups/g0/offsets", json=commit).status_code == 200
        yield b, sec, admin
    sec.close()


def _state(admin: httpx.Client) -> object:
    """Everything a denied call could have changed."""
    topics = admin.get("/topics").json()["topics"]
    described = {t["name"]: admin.get(f"/topics/{t['name']}").json() for t in topics}
    for d in described.values():
        for p in d["partitions"]:
            p.pop("tiering_lag", None)
    return (
        topics,
        described,
        admin.get("/groups").json(),
        admin.get("/groups/g0/offsets").json()["offsets"][0]["offset"],
    )


DENIED = [
    ("POST", "/topics", {"name": "new-topic"}, T),
    ("GET", "/topics/events", None, T),
    ("GET", "/topics/no-such-topic", None, T),  # 403, not 404: existence does not leak
    ("DELETE", "/topics/events", None, T),
    ("PATCH", "/topics/events/configs", {"configs": {"retention.ms": 1}}, T),
    ("POST", "/topics/events/partitions", {"partitions": 3}, T),
    ("POST", "/topics/events/records", REC, T),
    ("GET", "/topics/events/partitions/0/records", None, T),
    ("GET", "/topics/events/partitions/0/offsets", None, T),
    ("GET", "/topics/events/search?value=x", None, T),
    ("POST", "/topics/events/erasures", {"keys": ["k"]}, T),  # DELETE on the topic
    ("GET", "/topics/events/erasures", None, T),
    ("POST", "/producers", None, C),
    ("GET", "/groups/g0", None, G),
    ("POST", "/groups/g0/members", {"topics": ["events"]}, G),
    ("POST", "/groups/g0/members/m/heartbeat", {"member_epoch": 0}, G),
    ("DELETE", "/groups/g0/members/m", None, G),
    (
        "POST",
        "/groups/g0/offsets",
        {"offsets": [{"topic": "events", "partition": 0, "offset": 0}]},
        G,
    ),
    ("GET", "/groups/g0/offsets", None, G),
    ("POST", "/groups/g0/offsets/reset", {"at": "earliest"}, G),
    ("DELETE", "/groups/g0", None, G),
]


def test_a_key_without_acls_is_refused_everywhere_and_changes_nothing(env: Env) -> None:
    broker, sec, admin = env
    before = _state(admin)
    nobody = sec.client(broker.url, "nobody")
    for method, path, body, code in DENIED:
        r = nobody.request(method, path, json=body)
        assert (r.status_code, r.json()["error_code"]) == (403, code), (method, path, r.text)
    assert nobody.get("/topics").json() == {"topics": []}
    assert nobody.get("/groups").json() == {"groups": []}
    assert nobody.get("/brokers").status_code == 200  # metadata: any authenticated client
    assert _state(admin) == before


def test_the_right_acl_opens_exactly_its_operation(env: Env) -> None:
    broker, sec, _ = env
    sec.allow("writer", "topic", "events", "write")
    sec.allow("reader", "topic", "events", "read")
    writer, reader = sec.client(broker.url, "writer"), sec.client(broker.url, "reader")
    assert writer.post("/topics/events/records", json=REC).status_code == 200
    assert writer.post("/producers").status_code == 201  # write on some topic (KIP-679)
    assert writer.get("/topics/events/partitions/0/records").status_code == 403
    assert writer.get("/topics/events").status_code == 200  # write implies describe
    assert reader.get("/topics/events/partitions/0/records").json()["records"]
    assert reader.get("/topics/events/partitions/0/offsets").status_code == 200
    found = reader.get("/topics/events/search", params={"value": "x"}).text.splitlines()
    assert any('"type":"hit"' in line for line in found) and '"errors":0' in found[-1], found
    assert writer.get("/topics/events/search", params={"value": "x"}).status_code == 403
    assert reader.post("/topics/events/records", json=REC).status_code == 403
    assert reader.delete("/topics/events").status_code == 403
    assert reader.post("/topics/events/erasures", json={"keys": ["k"]}).status_code == 403
    assert writer.post("/topics/events/erasures", json={"keys": ["k"]}).status_code == 403
    sec.allow("eraser", "topic", "events", "delete")
    eraser = sec.client(broker.url, "eraser")
    made = eraser.post("/topics/events/erasures", json={"keys": ["no-such-key"]})
    assert made.status_code == 202 and made.json()["requested_by"] == "User:eraser", made.text
    assert eraser.get(f"/topics/events/erasures/{made.json()['id']}").status_code == 200
    assert [t["name"] for t in reader.get("/topics").json()["topics"]] == ["events"]


def test_prefixed_acls_and_deny_overrides_allow(env: Env) -> None:
    broker, sec, admin = env
    sec.allow("alice", "topic", "alice-", "all", prefixed=True)
    sec.deny("alice", "topic", "alice-secret", "describe", "read")
    alice = sec.client(broker.url, "alice")
    assert alice.post("/topics", json={"name": "alice-1"}).status_code == 201
    r = alice.post("/topics", json={"name": "bob-1"})
    assert (r.status_code, r.json()["error_code"]) == (403, T)
    assert alice.post("/topics/alice-1/records", json=REC).status_code == 200
    assert alice.get("/topics/alice-1/partitions/0/records").json()["records"]
    assert (
        alice.patch("/topics/alice-1/configs", json={"configs": {"retention.ms": 5000}}).status_code
        == 200
    )
    assert alice.post("/topics/alice-1/partitions", json={"partitions": 2}).status_code == 200
    assert alice.get("/topics/alice-nope").status_code == 404  # may describe: learns it's absent
    # The deny wins over the prefixed allow, for the denied operations only.
    assert alice.get("/topics/alice-secret").status_code == 403
    assert alice.get("/topics/alice-secret/partitions/0/records").status_code == 403
    assert alice.post("/topics/alice-secret/records", json=REC).status_code == 200
    names = [t["name"] for t in alice.get("/topics").json()["topics"]]
    assert names == ["alice-1"]  # not events, not alice-secret
    assert alice.delete("/topics/alice-1").status_code == 200
    assert "alice-1" not in [t["name"] for t in admin.get("/topics").json()["topics"]]


def test_group_acls(env: Env) -> None:
    broker, sec, admin = env
    sec.allow("consumer", "group", "app-", "read", prefixed=True)
    sec.allow("consumer", "topic", "events", "read")
    consumer = sec.client(broker.url, "consumer")
    r = consumer.post("/groups/app-1/members", json={"topics": ["events"]})
    assert r.status_code == 200, r.text
    member, epoch = r.json()["member_id"], r.json()["member_epoch"]
    r = consumer.post("/groups/app-1/members", json={"topics": ["alice-secret"]})
    assert (r.status_code, r.json()["error_code"]) == (403, T)
    commit = {"member_id": member, "member_epoch": epoch, "offsets": []}
    ok = {**commit, "offsets": [{"topic": "events", "partition": 0, "offset": 1}]}
    assert consumer.post("/groups/app-1/offsets", json=ok).status_code == 200
    bad = {**commit, "offsets": [{"topic": "alice-secret", "partition": 0, "offset": 0}]}
    r = consumer.post("/groups/app-1/offsets", json=bad)
    assert (r.status_code, r.json()["error_code"]) == (403, T)
    assert consumer.get("/groups/app-1").status_code == 200  # read implies describe
    assert [g["name"] for g in consumer.get("/groups").json()["groups"]] == ["app-1"]
    r = consumer.post("/groups/other/members", json={"topics": ["events"]})
    assert (r.status_code, r.json()["error_code"]) == (403, G)
    assert consumer.delete(f"/groups/app-1/members/{member}").status_code == 200
    # The committed offset of the topic it may not read stayed as it was.
    rows = admin.get("/groups/app-1/offsets").json()["offsets"]
    assert [(r["topic"], r["offset"]) for r in rows] == [("events", 1)]


def test_wildcard_principal_and_resource(env: Env) -> None:
    # Last in the module: it opens describe on every topic to everyone.
    broker, sec, _ = env
    sec.allow("User:*", "topic", "*", "describe")
    sec.deny("mallory", "topic", "*", "all")
    anyone, mallory = sec.client(broker.url, "anyone"), sec.client(broker.url, "mallory")
    assert anyone.get("/topics/events").status_code == 200
    assert anyone.get("/topics/events/partitions/0/records").status_code == 403
    assert mallory.get("/topics/events").status_code == 403
    assert mallory.get("/topics").json() == {"topics": []}
    assert mallory.post("/producers").status_code == 403  # denied on every topic
