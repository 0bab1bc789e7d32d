"""The HTTP API's concurrency limits and strict bodies against one real broker with auth on
(issue 24 K9, K12, K14):
- K9: searches are limited per principal and per node, admin requests per node; over a
  limit a 429 THROTTLING_QUOTA_EXCEEDED with Retry-After; a search whose client went away
  gives its slot back (it was cancelled), and other clients' produce and fetch go on;
- K12: POST /acls with a principal Kafka would not take is a 400 naming the rule, never a
  500 quoting SQL;
- K14: a body with a field the endpoint does not take (a PATCH without its `configs`
  wrapper, a misspelt field) is a 400, not a silent 200."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.secured import ADMIN, Secured, eventually, secure_broker

TOPIC = "admission"
VALUE = "x" * 8000
RECORDS = 3000  # 24 MB of hits: more than the sockets between a stalled reader and us hold
LIMITS = ["--max-searches-per-principal", "1", "--max-searches", "2", "--max-admin-requests", "1"]


class Env:
    def __init__(self, broker: BrokerProcess, sec: Secured) -> None:
        self.broker, self.sec = broker, sec
        self.admin = sec.client(broker.url, ADMIN)


@pytest.fixture(scope="module")
def env(db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    db = db_factory()
    sec = Secured(db)
    broker = secure_broker(db, tmp_path_factory.mktemp("admission") / "data-1", extra=LIMITS)
    try:
        broker.start()
        e = Env(broker, sec)
        assert e.admin.post("/topics", json={"name": TOPIC}).status_code == 201
        batch = {"records": [{"value": VALUE} for _ in range(500)]}
        for _ in range(RECORDS // 500):
            r = e.admin.post(f"/topics/{TOPIC}/records", json=batch)
            assert r.status_code == 200, r.text
        for user in ("alice", "bob", "carol"):
            sec.allow(user, "topic", TOPIC, "read")
        yield e
    finally:
        broker.stop()
        sec.close()


def _running(env: Env, kind: str) -> float:
    text = env.admin.get("/metrics").text
    found = re.search(rf'^tierlog_http_concurrent_requests{{kind="{kind}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def _stalled_search(env: Env, user: str) -> socket.socket:
    """A search whose client reads its status line and then nothing: the broker's answer
    stalls on the full socket, so the search holds its slot while the socket is open."""
    url = urlsplit(env.broker.url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((url.hostname or "127.0.0.1", url.port or 80))
    sock.sendall(
        f"GET /topics/{TOPIC}/search?value=x&max_hits=10000 HTTP/1.1\r\n"
        f"Host: {url.netloc}\r\nAuthorization: Bearer {env.sec.key(user)}\r\n\r\n".encode()
    )
    head = sock.recv(12)
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def _refused(r: httpx.Response, text: str) -> None:
    assert r.status_code == 429, r.text
    assert r.json()["error_code"] == "THROTTLING_QUOTA_EXCEEDED" and text in r.json()["message"]
    assert int(r.headers["retry-after"]) >= 1


def test_searches_are_limited_per_principal_and_node(env: Env) -> None:
    alice, carol = (env.sec.client(env.broker.url, u) for u in ("alice", "carol"))
    search = f"/topics/{TOPIC}/search"
    first = _stalled_search(env, "alice")
    try:
        eventually(lambda: _running(env, "search") == 1, timeout=30)
        _refused(alice.get(search, params={"value": "x"}), "for this principal (at most 1)")
        second = _stalled_search(env, "bob")
        try:
            eventually(lambda: _running(env, "search") == 2, timeout=30)
            _refused(carol.get(search, params={"value": "x"}), "on this node (at most 2)")
            # Everyone else's produce and fetch go on meanwhile.
            r = env.admin.post(f"/topics/{TOPIC}/records", json={"records": [{"value": "y"}]})
            assert r.status_code == 200, r.text
            page = env.admin.get(f"/topics/{TOPIC}/partitions/0/records", params={"offset": 0})
            assert page.status_code == 200 and page.json()["records"]
        finally:
            second.close()
    finally:
        first.close()
    # Their clients are gone: both searches are cancelled and give their slots back.
    eventually(lambda: _running(env, "search") == 0, timeout=30)
    r = alice.get(search, params={"value": "y"})
    assert r.status_code == 200 and '"type":"done"' in r.text


def test_admin_requests_are_limited_per_node(env: Env) -> None:
    url = urlsplit(env.broker.url)
    body = b'{"name": "admission-slow"}'
    slow = socket.create_connection((url.hostname or "127.0.0.1", url.port or 80))
    try:  # a topic create whose body arrives slowly holds the one admin slot
        slow.sendall(
            f"POST /topics HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Authorization: Bearer {env.sec.key(ADMIN)}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:5]
        )
        eventually(lambda: _running(env, "admin") == 1, timeout=30)
        _refused(env.admin.post("/topics", json={"name": "admission-b"}), "admin requests")
        patch = {"configs": {"retention.ms": "60000"}}
        _refused(env.admin.patch(f"/topics/{TOPIC}/configs", json=patch), "on this node")
        slow.sendall(body[5:])
        assert slow.recv(12).startswith(b"HTTP/1.1 201")
    finally:
        slow.close()
    eventually(lambda: _running(env, "admin") == 0, timeout=30)
    assert env.admin.post("/topics", json={"name": "admission-b"}).status_code == 201


def _bad(r: httpx.Response, code: str, text: str) -> None:
    assert r.status_code == 400, r.text
    doc = r.json()
    assert doc["error_code"] == code and text in doc["message"], doc
    assert "SQL" not in doc["message"] and "psycopg" not in doc["message"], doc


def test_acl_principals_follow_kafka_rules(env: Env) -> None:
    acl = {"resource_type": "topic", "resource_name": TOPIC, "operation": "read"}
    for principal in ("User:a b", "User:", "User:a\u2003b", "User:ann*", "carol", "Group:x"):
        r = env.admin.post("/acls", json={**acl, "principal": principal})
        _bad(r, "INVALID_REQUEST", "principal must read User:NAME")
        r = env.admin.delete("/acls", params={**acl, "principal": principal})
        _bad(r, "INVALID_REQUEST", "principal must read User:NAME")
    assert env.admin.post("/acls", json={**acl, "principal": "User:*"}).status_code == 201
    assert env.admin.delete("/acls", params={**acl, "principal": "User:*"}).status_code == 200


def test_bodies_with_fields_an_endpoint_does_not_take_are_refused(env: Env) -> None:
    configs = f"/topics/{TOPIC}/configs"
    _bad(env.admin.patch(configs, json={"retention.ms": "1000"}), "INVALID_CONFIG", "configs")
    _bad(env.admin.patch(configs, json={}), "INVALID_CONFIG", '{"configs"')
    both = {"configs": {"retention.ms": "1000"}, "dry_run": True}
    _bad(env.admin.patch(configs, json=both), "INVALID_CONFIG", "'dry_run'")
    assert env.admin.get(f"/topics/{TOPIC}").json()["configs"]["retention.ms"] != "1000"
    r = env.admin.patch(configs, json={"configs": {"retention.ms": "1000"}})
    assert r.status_code == 200 and r.json()["configs"]["retention.ms"] == "1000"
    typo = {"name": "admission-typo", "partition": 3}
    _bad(env.admin.post("/topics", json=typo), "INVALID_REQUEST", "'partition'")
    assert env.admin.get("/topics/admission-typo").status_code == 404  # nothing made
    grow = {"partitions": 2, "count": 3}
    _bad(env.admin.post(f"/topics/{TOPIC}/partitions", json=grow), "INVALID_PARTITIONS", "count")
    key = {"user": "dora", "desc": "x"}
    _bad(env.admin.post("/security/keys", json=key), "INVALID_REQUEST", "'desc'")
    commit = {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 1, "meta": "x"}]}
    _bad(env.admin.post("/groups/g/offsets", json=commit), "INVALID_REQUEST", "'meta'")
    commit = {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 1}], "member": "m"}
    _bad(env.admin.post("/groups/g/offsets", json=commit), "INVALID_REQUEST", "'member'")
