"""Idle and slow connections, on a broker and on a fetch node (issue 26 item 1): a socket that
sends nothing is closed at the header deadline, a trickled head gets 408 at it, a kept-alive
connection left idle is closed after the idle timeout, and the fetch node holds the same header
limits, per-address cap and cross-site guard as a broker.

Every wait on the server is `http_sockets.fate`, which fails when the server never closes:
the test's own timeout is never taken for the server's answer. One broker and one fetch node
serve the whole module."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import FAST
from tests.integration.fetch_nodes import FetchNodeProcess
from tests.integration.http_sockets import connect, fate, read_response

ATTACKER = "127.0.0.2"  # still loopback, so the per-address cap spares the test's own client
HEADER_TIMEOUT_S = 1.5
IDLE_TIMEOUT_S = 1.5
PER_ADDRESS = 20
FLAGS = [
    *("--header-timeout-ms", str(int(HEADER_TIMEOUT_S * 1000))),
    *("--idle-timeout-ms", str(int(IDLE_TIMEOUT_S * 1000))),
    *("--max-header-bytes", "16384"),
    *("--max-headers", "50"),
    *("--max-connections-per-address", str(PER_ADDRESS)),
]
PATIENCE_S = 15  # far past either deadline: only a server that never closes runs it out


@pytest.fixture(scope="module")
def nodes(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[int, str]]]:
    """{"broker"|"fetch node": (port, url)}, both started with the same connection limits."""
    db = db_factory()
    root = tmp_path_factory.mktemp("deadlines")
    broker = BrokerProcess(db, root / "data-1", 1, [*FAST, *FLAGS])
    node = FetchNodeProcess(db, root / "fetch.log", {}, FLAGS)
    try:
        broker.start(wait=False)
        node.launch()
        broker.wait_ready()
        node.wait_ready()
        yield {"broker": (broker.port, broker.url), "fetch node": (node.port, node.url)}
    finally:
        node.stop()
        broker.stop()


KINDS = ["broker", "fetch node"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_silent_connection_is_closed_at_the_header_deadline(
    nodes: dict[str, tuple[int, str]], kind: str
) -> None:
    port, _ = nodes[kind]

    async def silent() -> bytes:
        reader, writer = await connect(ATTACKER, port)
        try:
            return await fate(reader, PATIENCE_S)
        finally:
            writer.close()

    assert asyncio.run(silent()) == b""  # closed without a word: it never asked anything


@pytest.mark.parametrize("kind", KINDS)
def test_a_trickled_head_gets_408_at_the_header_deadline(
    nodes: dict[str, tuple[int, str]], kind: str
) -> None:
    port, _ = nodes[kind]

    async def trickle() -> bytes:
        reader, writer = await connect(ATTACKER, port)
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            # Each line well inside the deadline (it is not extended), and the last one sent
            # before it: a line landing after the server's 408 and close draws a reset, which
            # can drop the 408 from the client's buffer (seen once in a fresh clone: b'').
            for _ in range(3):
                await asyncio.sleep(HEADER_TIMEOUT_S / 4)
                if writer.is_closing():
                    break
                writer.write(b"X-Slow: 1\r\n")
            return await fate(reader, PATIENCE_S)
        finally:
            writer.close()

    answer = asyncio.run(trickle())
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"REQUEST_TIMED_OUT" in answer, answer


@pytest.mark.parametrize("kind", KINDS)
def test_an_idle_keep_alive_connection_is_closed(
    nodes: dict[str, tuple[int, str]], kind: str
) -> None:
    port, _ = nodes[kind]

    async def keep_alive() -> tuple[int, int, bytes]:
        reader, writer = await connect(ATTACKER, port)
        try:
            request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"
            writer.write(request)
            first, _ = await read_response(reader)
            writer.write(request)  # the connection was kept: a second request is served
            second, _ = await read_response(reader)
            return first, second, await fate(reader, PATIENCE_S)  # then left idle
        finally:
            writer.close()

    first, second, rest = asyncio.run(keep_alive())
    assert (first, second) == (200, 200)
    assert rest == b"", rest[:200]


def test_the_fetch_node_refuses_header_bombs_and_caps_connections_per_address(
    nodes: dict[str, tuple[int, str]],
) -> None:
    port, url = nodes["fetch node"]
    with httpx.Client(base_url=url, timeout=10) as http:
        big = http.get("/healthz", headers={"x-big": "a" * 20_000})
        assert big.status_code == 431, big.text
        assert big.json()["error_code"] == "INVALID_REQUEST" and "16384" in big.json()["message"]
        many = http.get("/healthz", headers={f"x-h{i}": "1" for i in range(60)})
        assert many.status_code == 431, many.text

    async def flood() -> list[bytes]:
        conns = [await connect(ATTACKER, port) for _ in range(PER_ADDRESS + 5)]
        try:
            # The cap's holders are closed at the header deadline, the rest at once with 429.
            return list(await asyncio.gather(*(fate(r, PATIENCE_S) for r, _ in conns)))
        finally:
            for _, writer in conns:
                writer.close()

    fates = asyncio.run(flood())
    refused = [f for f in fates if f.startswith(b"HTTP/1.1 429")]
    assert len(refused) == 5, [f[:40] for f in fates]
    assert all(b"THROTTLING_QUOTA_EXCEEDED" in f for f in refused), refused[0]
    assert fates.count(b"") == PER_ADDRESS, [f[:40] for f in fates]


def test_the_fetch_node_refuses_cross_site_writes(nodes: dict[str, tuple[int, str]]) -> None:
    _, url = nodes["fetch node"]
    body = b'{"member_id": "m"}'
    evil = "http://evil.example"
    with httpx.Client(base_url=url, timeout=10) as http:
        for ctype in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded"):
            # A browser's "simple" request, sent without a preflight from any web page.
            r = http.post("/groups/g/members", content=body, headers={"content-type": ctype})
            assert r.status_code == 415, r.text
            assert r.json()["error_code"] == "UNSUPPORTED_MEDIA_TYPE", r.text
            r = http.post(
                "/groups/g/members", content=body, headers={"content-type": ctype, "origin": evil}
            )
            assert r.status_code == 403, r.text
            assert "cross-site" in r.json()["message"] and evil in r.json()["message"], r.text
        r = http.post(
            "/groups/g/members",
            content=body,
            headers={"content-type": "application/json", "origin": "null"},
        )
        assert r.status_code == 403, r.text
        # Reads change nothing and are served whatever their Origin.
        r = http.get("/topics", headers={"origin": evil})
        assert r.status_code == 200, r.text
