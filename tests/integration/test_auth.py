"""Authentication on a real broker with auth on: API keys, the open paths, revocation, the
cluster credential, internal endpoints, and roles that refuse to start without auth."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.secured import ADMIN, Secured, eventually, secure_broker, started
from tierlog.cli.main import main

PUBLIC = [
    ("GET", "/topics"),
    ("POST", "/topics"),
    ("GET", "/topics/events"),
    ("DELETE", "/topics/events"),
    ("PATCH", "/topics/events/configs"),
    ("POST", "/topics/events/partitions"),
    ("POST", "/topics/events/records"),
    ("GET", "/topics/events/partitions/0/records"),
    ("GET", "/topics/events/partitions/0/offsets"),
    ("POST", "/producers"),
    ("GET", "/brokers"),
    ("GET", "/groups"),
    ("GET", "/groups/g"),
    ("POST", "/groups/g/members"),
    ("POST", "/groups/g/offsets"),
    ("GET", "/groups/g/offsets"),
]


@pytest.fixture(scope="module")
def env(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, Secured]]:
    url = db_factory()
    sec = Secured(url)
    broker = secure_broker(url, Path(tmp_path_factory.mktemp("auth")) / "data")
    for b in started(broker):
        admin = sec.client(b.url, "admin")
        r = admin.post("/topics", json={"name": "events", "partitions": 1})
        assert r.status_code == 201, r.text
        yield b, sec
    sec.close()


@pytest.mark.parametrize(("method", "path"), PUBLIC)
def test_no_key_is_401_and_changes_nothing(
    env: tuple[BrokerProcess, Secured], method: str, path: str
) -> None:
    broker, sec = env
    body = {"records": [{"value": "x"}]} if path.endswith("/records") else {"name": "sneaky"}
    anon = sec.client(broker.url, None)
    bad = sec.client(
        broker.url, None, headers={"authorization": "Bearer tlk_0123456789ab_" + "x" * 43}
    )
    for client in (anon, bad):
        r = client.request(method, path, json=body if method != "GET" else None)
        assert r.status_code == 401, r.text
        assert r.json()["error_code"] == "SASL_AUTHENTICATION_FAILED"
        assert r.headers["www-authenticate"] == "Bearer"
    admin = sec.client(broker.url, "admin")
    assert [t["name"] for t in admin.get("/topics").json()["topics"]] == ["events"]
    assert admin.get("/topics/events/partitions/0/offsets").json()["offset"] == 0


def test_open_paths_need_no_key(env: tuple[BrokerProcess, Secured]) -> None:
    broker, sec = env
    anon = sec.client(broker.url, None)
    for path in ("/healthz", "/readyz", "/openapi.json"):
        assert anon.get(path).status_code == 200, path
    # /metrics names every topic and principal: a key is needed (issue 24 K7).
    assert anon.get("/metrics").status_code == 401


def test_malformed_authorization_headers_are_401(env: tuple[BrokerProcess, Secured]) -> None:
    broker, sec = env
    anon = sec.client(broker.url, None)
    for header in ("Basic abc", "Bearer", "Bearer  x", "tlk_x", "Bearer tlk_zz_" + "y" * 40):
        r = anon.get("/topics", headers={"authorization": header})
        assert r.status_code == 401, header


def test_revoked_key_is_refused_within_the_cache_ttl(env: tuple[BrokerProcess, Secured]) -> None:
    broker, sec = env
    sec.allow("carol", "topic", "events", "describe")
    carol = sec.client(broker.url, "carol")
    assert carol.get("/topics/events").status_code == 200
    assert sec.repo.revoke("carol") != []
    eventually(lambda: carol.get("/topics/events").status_code == 401)
    r = carol.post("/topics/events/records", json={"records": [{"value": "x"}]})
    assert r.status_code == 401


def test_super_user_may_do_anything(env: tuple[BrokerProcess, Secured]) -> None:
    broker, sec = env
    admin = sec.client(broker.url, "admin")
    assert admin.get("/brokers").status_code == 200
    assert admin.post("/producers").status_code == 201
    assert ADMIN == "User:admin"  # the broker was started with --super-users User:admin


def test_public_key_cannot_reach_internal_endpoints(env: tuple[BrokerProcess, Secured]) -> None:
    broker, sec = env
    admin = sec.client(broker.url, "admin")  # even a super user's public key
    for method, path in (
        ("POST", "/internal/replicas/fetch"),
        ("POST", "/internal/topics/events/partitions/0/append"),
        ("GET", "/internal/topics/events/led"),
        ("GET", "/internal/topics/events/partitions/0/segments/0"),
        ("GET", "/internal/topics/events/partitions/0/frames/0?topic_id=x"),
    ):
        r = admin.request(method, path, content=b"{}")
        assert r.status_code == 403, (path, r.text)
        assert r.json()["error_code"] == "CLUSTER_AUTHORIZATION_FAILED"


def test_cluster_token_is_the_cluster_principal(env: tuple[BrokerProcess, Secured]) -> None:
    broker, sec = env
    token = {"x-tierlog-cluster-token": sec.cluster_secret()}
    internal = sec.client(broker.url, None, headers=token)
    assert internal.get("/topics/events").status_code == 200
    assert internal.get("/internal/topics/events/led").status_code == 200
    wrong = sec.client(broker.url, None, headers={"x-tierlog-cluster-token": "0" * 64})
    assert wrong.get("/topics/events").status_code == 401


@pytest.mark.parametrize("role", ["broker", "fetch"])
def test_roles_refuse_to_start_without_auth(
    role: str, fresh_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In process: the refusal comes before anything is started or imported.
    monkeypatch.setattr("faulthandler.register", lambda *a, **k: None)  # wants a real stderr
    base = [role, "--database-url", fresh_db, "--listen", "127.0.0.1:1"]
    assert main([*base, "--auth", "none"]) == 2
    assert "refusing to start without authentication" in capsys.readouterr().err
    monkeypatch.setenv("TIERLOG_AUTH", "none")
    assert main(base) == 2
    assert "--insecure" in capsys.readouterr().err
    monkeypatch.setenv("TIERLOG_AUTH", "bogus")
    assert main(base) == 2
    assert "TIERLOG_AUTH must be apikey or none" in capsys.readouterr().err


def test_insecure_broker_warns_loudly(broker: BrokerProcess) -> None:
    assert broker.http.get("/topics").status_code == 200  # no key needed
    assert "AUTHENTICATION IS OFF" in broker.log_path.read_text()
