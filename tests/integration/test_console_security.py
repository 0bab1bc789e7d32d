"""The Security page (issue 20 item 5) and the API it drives, on a real broker with auth on:
API keys (the secret shown once, revocation effective at once), ACLs (add, remove, what a
principal may do), quotas; cluster DESCRIBE to look, ALTER to change; bad input 4xx. The
browser tests sign in to a `tierlog console` in front of the same broker."""

from __future__ import annotations

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.integration.brokers import BrokerProcess
from tests.integration.console_browser import (  # noqa: F401
    ConsoleStack,
    secure_browser_fixture,
    secure_console_fixture,
)
from tests.integration.console_login import SESSION_COOKIE
from tests.integration.secured import Secured, eventually

Env = tuple[BrokerProcess, Secured, httpx.Client]
READ_ORDERS = {
    "principal": "User:carol",
    "resource_type": "topic",
    "resource_name": "orders",
    "operation": "read",
}


@pytest.fixture(scope="module")
def env(secure_console: ConsoleStack) -> Env:
    """The harness's broker with auth on (its console serves the browser tests), a topic."""
    assert secure_console.secured is not None
    admin = secure_console.api
    assert admin.post("/topics", json={"name": "orders"}).status_code == 201
    return secure_console.broker, secure_console.secured, admin


@pytest.fixture
def browser(secure_browser: ConsoleStack, env: Env) -> ConsoleStack:
    if not secure_browser.driver.get_cookie(SESSION_COOKIE):
        secure_browser.sign_in()
    return secure_browser


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


def test_page_adds_explains_and_removes_an_acl(browser: ConsoleStack, env: Env) -> None:
    _, _, admin = env
    browser.visit("/security")
    browser.find("#acl-principal").send_keys("User:hana")
    Select(browser.find("#acl-operation")).select_by_visible_text("write")
    browser.find("#acl-resource-name").send_keys("orders")
    browser.find("#acl-add").click()
    assert "Added allow User:hana write on topic orders" in browser.text("#notice")
    row = "#acls tr[data-acl='User:hana allow write topic orders literal']"
    assert browser.find(row)
    assert admin.get("/acls", params={"principal": "User:hana"}).json()["acls"]
    browser.find("#rights-principal").send_keys("hana")
    browser.find("#rights-check").click()
    assert browser.text("#rights tr[data-resource='topic orders'] .allowed") == "write, describe"
    browser.screenshot("security")
    browser.find(f"{row} .remove-acl").click()
    browser.driver.switch_to.alert.accept()
    assert "Removed allow User:hana write" in browser.text("#notice")
    assert not browser.driver.find_elements(By.CSS_SELECTOR, row)
    assert admin.get("/acls", params={"principal": "User:hana"}).json()["acls"] == []
    # A refused change shows the API's error by name, not a trace.
    browser.find("#acl-principal").send_keys("hana")  # not User:...
    browser.find("#acl-resource-name").send_keys("orders")
    browser.find("#acl-add").click()
    assert browser.text(".error .error-name") == "INVALID_REQUEST"
    assert "principal must read User:NAME" in browser.text(".error .error-message")


def test_page_creates_a_key_shown_once_then_revokes_it(browser: ConsoleStack, env: Env) -> None:
    b, _, _ = env
    browser.visit("/security")
    browser.find("#key-user").send_keys("ivan")
    browser.find("#key-description").send_keys("from the console")
    browser.find("#key-create").click()
    secret = browser.text("#new-key-secret")
    key_id = secret.split("_")[1]
    browser.screenshot("security-new-key")
    with httpx.Client(base_url=b.url, headers={"authorization": f"Bearer {secret}"}) as ivan:
        assert ivan.get("/topics").status_code == 200  # the key works
        browser.visit("/security", "security-keys")
        assert secret not in browser.driver.page_source  # shown once only
        browser.find(f"#keys tr[data-key='{key_id}'] .revoke").click()
        browser.driver.switch_to.alert.accept()
        assert f"Revoked key {key_id} of User:ivan" in browser.text("#notice")
        assert browser.text(f"#keys tr[data-key='{key_id}'] .key-state") == "revoked"
        eventually(lambda: ivan.get("/topics").status_code == 401)


def test_page_sets_and_removes_a_quota(browser: ConsoleStack, env: Env) -> None:
    _, _, admin = env
    browser.visit("/security")
    browser.find("#quota-entity").send_keys("User:jo")
    browser.find("#quota-produce").send_keys("250000")
    browser.find("#quota-set").click()
    assert "Set the quota of User:jo" in browser.text("#notice")
    assert browser.text("#quotas tr[data-entity='User:jo']").split() == [
        "User:jo", "250000", "unlimited", "Remove",
    ]  # fmt: skip
    browser.find("#quotas tr[data-entity='User:jo'] .remove-quota").click()
    browser.driver.switch_to.alert.accept()
    assert "Removed the quota of User:jo" in browser.text("#notice")
    assert "User:jo" not in {q["entity"] for q in admin.get("/quotas").json()["quotas"]}
