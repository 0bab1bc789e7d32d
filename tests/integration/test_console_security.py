"""The security API the console's Security page drives (issue 20 item 5), on a real broker with
auth on: API keys (the secret shown once, revocation effective at once), ACLs (add, remove,
what a principal may do), quotas; cluster DESCRIBE to look, ALTER to change; bad input 4xx."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.secured import Secured, eventually, secure_broker, started

Env = tuple[BrokerProcess, Secured, httpx.Client]
READ_ORDERS = {
    "principal": "User:carol",
    "resource_type": "topic",
    "resource_name": "orders",
    "operation": "read",
}


@pytest.fixture(scope="module")
def env(db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    url = db_factory()
    sec = Secured(url)
    broker = secure_broker(url, Path(tmp_path_factory.mktemp("security")) / "data")
    for b in started(broker):
        admin = sec.client(b.url, "admin")
        assert admin.post("/topics", json={"name": "orders"}).status_code == 201
        yield b, sec, admin
    sec.close()


def error(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["error_code"] == code, r.text


def test_api_key_created_shown_once_and_revoked(env: Env) -> None:
    b, _sec, admin = env
    made = admin.post("/security/keys", json={"user": "dave", "description": "ci"})
    assert made.status_code == 201, made.text
    doc = made.json()
    assert doc["principal"] == "User:dave" and doc["key"].startswith(f"tlk_{doc['key_id']}_")
    listed = {k["key_id"]: k for k in admin.get("/security/keys").json()["keys"]}
    assert listed[doc["key_id"]]["description"] == "ci"
    assert doc["key"] not in admin.get("/security/keys").text  # never shown again
    dave = httpx.Client(base_url=b.url, headers={"authorization": f"Bearer {doc['key']}"})
    with dave:
        error(dave.get("/topics/orders"), 403, "TOPIC_AUTHORIZATION_FAILED")  # known, no ACL
        revoked = admin.delete(f"/security/keys/{doc['key_id']}")
        assert revoked.json() == {
            "key_id": doc["key_id"],
            "principal": "User:dave",
            "revoked": True,
        }
        eventually(lambda: dave.get("/topics/orders").status_code == 401)
    again = admin.delete(f"/security/keys/{doc['key_id']}").json()
    assert again["revoked"] is False  # already revoked: nothing to do
    error(admin.delete("/security/keys/000000000000"), 404, "NOT_FOUND")
    error(admin.post("/security/keys", json={"user": "bad name"}), 400, "INVALID_REQUEST")
    error(admin.post("/security/keys", json={}), 400, "INVALID_REQUEST")


def test_acls_added_listed_explained_and_removed(env: Env) -> None:
    b, sec, admin = env
    carol = sec.client(b.url, "carol")
    error(carol.get("/topics/orders/partitions/0/offsets"), 403, "TOPIC_AUTHORIZATION_FAILED")
    added = admin.post("/acls", json=READ_ORDERS)
    assert added.status_code == 201 and added.json()["created"] is True, added.text
    assert admin.post("/acls", json=READ_ORDERS).status_code == 200  # already there
    deny = {**READ_ORDERS, "resource_name": "ord", "pattern_type": "prefixed"}
    deny |= {"operation": "write", "permission": "deny"}
    assert admin.post("/acls", json=deny).status_code == 201
    mine = admin.get("/acls", params={"principal": "User:carol"}).json()["acls"]
    assert {(a["operation"], a["permission"]) for a in mine} == {
        ("read", "allow"),
        ("write", "deny"),
    }
    eventually(lambda: carol.get("/topics/orders/partitions/0/offsets").status_code == 200)

    rights = admin.get("/acls/principal", params={"principal": "carol"}).json()
    assert rights["principal"] == "User:carol" and rights["super_user"] is False
    by_name = {(r["pattern_type"], r["resource_name"]): r["allowed"] for r in rights["resources"]}
    assert by_name[("literal", "orders")] == ["read", "describe"]  # describe implied by read
    assert by_name[("prefixed", "ord")] == []  # a deny grants nothing
    assert admin.get("/acls/principal", params={"principal": "admin"}).json()["super_user"]

    gone = admin.delete("/acls", params=READ_ORDERS)
    assert gone.status_code == 200 and gone.json()["deleted"] is True, gone.text
    error(admin.delete("/acls", params=READ_ORDERS), 404, "NOT_FOUND")
    eventually(lambda: carol.get("/topics/orders/partitions/0/offsets").status_code == 403)
    bad = {**READ_ORDERS, "operation": "fly"}
    r = admin.post("/acls", json=bad)
    error(r, 400, "INVALID_REQUEST")
    assert "operation must be one of" in r.json()["message"]
    error(admin.post("/acls", json={**READ_ORDERS, "principal": "carol"}), 400, "INVALID_REQUEST")
    error(admin.get("/acls/principal"), 400, "INVALID_REQUEST")


def test_quotas_set_cleared_and_removed(env: Env) -> None:
    _, _, admin = env
    r = admin.put("/quotas/User:erin", json={"producer_byte_rate": 1_000_000})
    assert r.json() == {
        "entity": "User:erin",
        "producer_byte_rate": 1_000_000,
        "consumer_byte_rate": None,
    }, r.text
    both = {"consumer_byte_rate": 5000, "producer_byte_rate": None}
    assert admin.put("/quotas/User:erin", json=both).json()["producer_byte_rate"] is None
    assert admin.put("/quotas/<default>", json={"consumer_byte_rate": 9}).status_code == 200
    listed = {q["entity"]: q for q in admin.get("/quotas").json()["quotas"]}
    assert listed["User:erin"]["consumer_byte_rate"] == 5000 and "<default>" in listed
    assert admin.delete("/quotas/User:erin").json()["deleted"] is True
    error(admin.delete("/quotas/User:erin"), 404, "NOT_FOUND")
    error(admin.put("/quotas/User:erin", json={"producer_byte_rate": 0}), 400, "INVALID_CONFIG")
    error(admin.put("/quotas/User:erin", json={"speed": 1}), 400, "INVALID_CONFIG")
    error(admin.put("/quotas/erin", json={"producer_byte_rate": 1}), 400, "INVALID_REQUEST")


def test_security_admin_needs_cluster_rights(env: Env) -> None:
    b, sec, _admin = env
    frank = sec.client(b.url, "frank")
    for method, path, body in (
        ("GET", "/security/keys", None),
        ("POST", "/security/keys", {"user": "frank2"}),
        ("GET", "/acls", None),
        ("POST", "/acls", READ_ORDERS),
        ("GET", "/quotas", None),
        ("PUT", "/quotas/User:frank", {"producer_byte_rate": 1}),
    ):
        error(frank.request(method, path, json=body), 403, "CLUSTER_AUTHORIZATION_FAILED")
    sec.allow("frank", "cluster", "kafka-cluster", "describe")
    assert frank.get("/acls").status_code == 200  # describe lists...
    error(frank.post("/acls", json=READ_ORDERS), 403, "CLUSTER_AUTHORIZATION_FAILED")  # not alter
