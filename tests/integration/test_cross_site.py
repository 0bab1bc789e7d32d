"""Cross-site writes (issue 13, found #4): a web page can send a browser's "simple" request
(no CORS preflight) to a broker on 127.0.0.1. Such requests carry text/plain, form or no
media type, and an `Origin` that is not the broker's: each is refused and writes nothing."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.brokers import BrokerProcess

VALID = b'{"records":[{"value":"from a web page"}]}'


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module (a broker start is seconds): each test has its own topic."""
    return module_broker


def _browser_post(
    broker: BrokerProcess, path: str, ctype: str | None, origin: str | None
) -> httpx.Response:
    """What fetch(url, {method: "POST", mode: "no-cors", body}) sends: no preflight."""
    headers = {"user-agent": "Mozilla/5.0", "accept": "*/*"}
    if ctype is not None:
        headers["content-type"] = ctype
    if origin is not None:
        headers["origin"] = origin
    return broker.http.post(path, content=VALID, headers=headers)


def _error(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    doc = r.json()
    assert doc["error_code"] == code, doc
    return str(doc["message"])


def test_simple_requests_from_a_web_page_write_nothing(broker: BrokerProcess) -> None:
    broker.create_topic("victim")
    evil = "http://evil.example"
    for ctype in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded", None):
        message = _error(
            _browser_post(broker, "/topics/victim/records", ctype, evil), 403, "INVALID_REQUEST"
        )
        assert "cross-site" in message and evil in message
        # Without an Origin (a client that hides it), the media type alone refuses the body.
        message = _error(
            _browser_post(broker, "/topics/victim/records", ctype, None),
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        )
        assert "application/json" in message
    # Even a JSON body is refused from a foreign origin (a preflight would be needed, and a
    # page with a "null" origin, a sandboxed frame, is foreign too).
    for origin in (evil, "null", f"http://127.0.0.1:{broker.port + 1}"):
        r = broker.http.post(
            "/topics/victim/records",
            content=VALID,
            headers={"content-type": "application/json", "origin": origin},
        )
        _error(r, 403, "INVALID_REQUEST")
    # Every body-taking endpoint checks the media type, not only produce.
    for path in ("/topics", "/topics/victim/partitions", "/producers", "/groups/g/members"):
        _error(_browser_post(broker, path, "text/plain", None), 415, "UNSUPPORTED_MEDIA_TYPE")
    r = broker.http.delete("/topics/victim", headers={"origin": evil})
    _error(r, 403, "INVALID_REQUEST")
    doc = broker.fetch("victim", 0, 0)
    assert doc["records"] == [], doc  # nothing was written, and the topic is still there


def test_own_origin_and_plain_clients_are_served(broker: BrokerProcess) -> None:
    broker.create_topic("home")
    for origin in (broker.url, f"http://localhost:{broker.port}", None):
        headers = {"content-type": "application/json"}
        if origin is not None:
            headers["origin"] = origin
        r = broker.http.post("/topics/home/records", content=VALID, headers=headers)
        assert r.status_code == 200, r.text
    # A body-less POST needs no media type (POST /producers takes none).
    assert broker.http.post("/producers").status_code == 201
    # Reads are never refused for their Origin: they change nothing.
    r = broker.http.get(
        "/topics/home/partitions/0/records",
        params={"offset": 0},
        headers={"origin": "http://evil.example"},
    )
    assert r.status_code == 200 and len(r.json()["records"]) == 3, r.text
