"""The console's sign-in, sessions and rights against a real broker (auth on) and a real
`tierlog console` process, over plain HTTP (issue 24 K6, K7, K13; issue 26 item 2):
- K6: sign-in sends users only to paths of this site, whatever `next` says, in both the
  303's Location and htmx's HX-Redirect, and never splits a header;
- K13: the cookie is an opaque session id, not the key; signing out ends the session, so a
  copy of the old cookie no longer works;
- K7: /history.json and a group's lag.json need a session and show only what the key may
  see (a group it may not describe, cluster-wide series without DESCRIBE on the cluster);
  the broker's /metrics needs a key with DESCRIBE on the cluster."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import httpx
import pytest
from starlette.routing import Route

from console.app import create_app
from tests.integration.brokers import BrokerProcess
from tests.integration.console_browser import ConsoleProcess
from tests.integration.console_login import SESSION_COOKIE, csrf_token, post_login, signed_in
from tests.integration.secured import ADMIN, Secured, eventually, secure_broker

TOPIC = "rights-orders"
HIDDEN, VISIBLE = "rights-hidden", "rights-visible"
# `next` as an attacker writes it into a link (the query string, sent as is).
FOREIGN_NEXTS = [
    "/\\evil.example",  # /\host: a browser reads it as //host
    "//evil.example",
    "/%5Cevil.example",  # the same, percent-encoded
    "/%09/evil.example",  # browsers drop the tab: //evil.example
    "/%0a/evil.example",
    "/%2F/evil.example",
    "https:evil.example",
    "https://evil.example/",
    "/%0D%0ASet-Cookie:%20stolen=1",  # header injection
]


class Env:
    def __init__(self, broker: BrokerProcess, console: ConsoleProcess, sec: Secured) -> None:
        self.broker, self.console, self.sec = broker, console, sec
        self.admin = sec.client(broker.url, ADMIN)


@pytest.fixture(scope="module")
def env(db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    db = db_factory()
    root = tmp_path_factory.mktemp("console-rights")
    sec = Secured(db)
    broker = secure_broker(db, root / "data-1")
    console: ConsoleProcess | None = None
    try:
        broker.start()
        console = ConsoleProcess(broker.url, root / "console.log", sec.key(ADMIN)).start()
        e = Env(broker, console, sec)
        assert e.admin.post("/topics", json={"name": TOPIC}).status_code == 201
        for group in (HIDDEN, VISIBLE):
            body = {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 0}]}
            assert e.admin.post(f"/groups/{group}/offsets", json=body).status_code == 200
        yield e
    finally:
        if console is not None:
            console.stop()
        broker.stop()
        sec.close()


def test_sign_in_redirects_only_to_this_site(env: Env) -> None:
    key = env.sec.key(ADMIN)
    with httpx.Client(base_url=env.console.url, timeout=30) as c:
        for raw in FOREIGN_NEXTS:
            plain = post_login(c, key, f"?next={raw}")
            assert plain.status_code == 303 and plain.headers["location"] == "/", (raw, plain)
            assert "stolen" not in str(plain.headers.raw)
            htmx = post_login(c, key, f"?next={raw}", htmx=True)
            assert htmx.status_code == 204 and htmx.headers["hx-redirect"] == "/", (raw, htmx)
            assert "stolen" not in str(htmx.headers.raw)
            page = c.get(f"/login?next={raw}")  # the form posts back to a safe next too
            assert "evil.example" not in page.text and "stolen" not in page.text, raw
        # A path of this site, with its query, is kept.
        kept = post_login(c, key, "?next=/topics%3Fq%3Da", htmx=True)
        assert kept.headers["hx-redirect"] == "/topics?q=a"


def test_cookie_is_an_opaque_session_that_sign_out_ends(env: Env) -> None:
    key = env.sec.key(ADMIN)
    with signed_in(env.console.url, key) as c:
        session = c.cookies[SESSION_COOKIE]
        assert key not in session and key not in str(c.cookies.jar)  # the key stays server-side
        assert c.get("/topics").status_code == 200
        # A copy of the cookie (stolen, or kept by the browser) works until sign-out...
        with httpx.Client(base_url=env.console.url, cookies={SESSION_COOKIE: session}) as copy:
            assert copy.get("/topics").status_code == 200
            out = c.post("/logout", data={"csrf_token": csrf_token(c, "/topics")})
            assert out.status_code == 303 and out.headers["location"] == "/login"
            # ...and not after: the session ended on the server.
            gone = copy.get("/topics")
            assert gone.status_code == 303 and gone.headers["location"].startswith("/login")
    # A made-up session id, or the raw key as a cookie, is no session.
    for value in ("made-up", key):
        r = httpx.get(f"{env.console.url}/topics", cookies={SESSION_COOKIE: value})
        assert r.status_code == 303 and r.headers["location"] == "/login?next=/topics"


def _series(client: httpx.Client) -> dict[str, object]:
    r = client.get("/history.json")
    assert r.status_code == 200, r.text
    series = r.json()["series"]
    assert isinstance(series, dict)
    return series


def test_history_and_lag_need_a_session_and_the_rights(env: Env) -> None:
    # Without a session: nothing (the charts say "history unavailable (HTTP 401)").
    for path in ("/history.json", f"/groups/{HIDDEN}/lag.json"):
        r = httpx.get(f"{env.console.url}{path}")
        assert r.status_code == 401, (path, r.text)
        assert HIDDEN not in r.text and "produce_records_per_s" not in r.text
    with signed_in(env.console.url, env.sec.key(ADMIN)) as admin:
        for group in (HIDDEN, VISIBLE):  # a visit records a point of the group's lag
            assert admin.get(f"/groups/{group}").status_code == 200
        eventually(lambda: "under_replicated" in _series(admin), timeout=30)
        assert {f"group:{HIDDEN}:records", f"group:{VISIBLE}:records"} <= set(_series(admin))
        assert admin.get(f"/groups/{HIDDEN}/lag.json").status_code == 200
    # A key that may describe one group, and nothing of the cluster.
    env.sec.allow("viewer", "group", VISIBLE, "describe")
    with signed_in(env.console.url, env.sec.key("viewer")) as viewer:
        names = set(_series(viewer))
        assert f"group:{VISIBLE}:records" in names, names
        assert all(n.startswith(f"group:{VISIBLE}:") for n in names), names
        asked = viewer.get("/history.json", params={"series": f"group:{HIDDEN}:records"})
        assert asked.json()["series"] == {}
        assert viewer.get(f"/groups/{VISIBLE}/lag.json").status_code == 200
        hidden = viewer.get(f"/groups/{HIDDEN}/lag.json")
        assert hidden.status_code == 403, hidden.text
        assert hidden.json()["error_code"] == "GROUP_AUTHORIZATION_FAILED"


OPEN = {"/login", "/healthz", "/readyz"}


def test_every_console_page_needs_a_session(env: Env) -> None:
    """Every GET route of the console (listed from the app itself), asked without a session:
    sent to sign in (303), refused (401), or, for the search stream, a sign-in error line."""
    routes = [
        re.sub(r"\{[^}]+\}", HIDDEN, r.path)
        for r in create_app("http://127.0.0.1:9").routes
        if isinstance(r, Route) and "GET" in (r.methods or ()) and r.path not in OPEN
    ]
    assert {"/", "/history.json", "/messages", "/messages/tail", "/groups"} <= set(routes)
    with httpx.Client(base_url=env.console.url, timeout=30) as anon:
        for path in routes:
            r = anon.get(path, params={"topic": TOPIC, "next": "0:0"})
            if r.status_code == 303:
                assert r.headers["location"].startswith("/login?next="), path
            elif r.status_code != 401:
                assert r.status_code == 200 and path == "/messages/search", (path, r.text)
                assert '"error_code":"SASL_AUTHENTICATION_FAILED"' in r.text, r.text
            assert HIDDEN not in r.text.replace(path, ""), (path, r.text)


def test_broker_metrics_need_a_key_that_may_describe_the_cluster(env: Env) -> None:
    anon = env.sec.client(env.broker.url, None)
    r = anon.get("/metrics")
    assert r.status_code == 401 and r.json()["error_code"] == "SASL_AUTHENTICATION_FAILED"
    assert TOPIC not in r.text
    nobody = env.sec.client(env.broker.url, "metrics-nobody")
    r = nobody.get("/metrics")
    assert r.status_code == 403 and r.json()["error_code"] == "CLUSTER_AUTHORIZATION_FAILED"
    env.sec.allow("prometheus", "cluster", "kafka-cluster", "describe")
    scraper = env.sec.client(env.broker.url, "prometheus")
    r = scraper.get("/metrics")
    assert r.status_code == 200 and "tierlog_produce_records_total" in r.text
    assert r.headers["content-type"].startswith("text/plain")
