"""Node-to-node HTTP over aiohttp: answers arrive whole, and each way a peer can fail is the
httpx error httpx raises for it, as the death signal tells a gone peer from a slow one. Both
ways in: an httpx client on the transport, and post_direct's (a follower's replica fetches),
which skips httpx's request and response models."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from cluster.internal_http import (
    CLUSTER_TOKEN_HEADER,
    internal_async_client,
    internal_transport,
    post_direct,
)
from ingest.replication.death_signal import dropped

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
BODY = bytes(range(256)) * 4096  # 1 MiB: several reads, one answer


async def _head(reader: asyncio.StreamReader) -> dict[str, str]:
    lines = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")[1:]
    return {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line)}


async def _echo_token(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await _head(reader)
    sent = await reader.readexactly(int(head["content-length"]))
    token = head.get(CLUSTER_TOKEN_HEADER, "").encode()
    payload = token + b"|" + sent + b"|" + BODY
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(payload) + payload)
    await writer.drain()
    writer.close()


async def _cut_mid_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _head(reader)
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\nonly part")
    await writer.drain()
    writer.close()


async def _closed_unanswered(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _head(reader)
    writer.close()


async def _reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _head(reader)
    writer.transport.abort()  # RST instead of FIN


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _head(reader)
    await asyncio.sleep(30)


@asynccontextmanager
async def _serving(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


async def _send(via: str, url: str, timeout: httpx.Timeout) -> tuple[int, bytes]:
    if via == "direct":
        transport = internal_transport()
        try:
            return await post_direct(transport, url, b"ask", "secret", timeout)
        finally:
            await transport.aclose()
    client = internal_async_client(lambda: "secret", timeout)
    try:
        response = await client.post(url, content=b"ask")
        return response.status_code, response.content
    finally:
        await client.aclose()


async def _post(handler: Handler | None, via: str, timeout: float = 5.0) -> tuple[int, bytes]:
    limits = httpx.Timeout(timeout, connect=2.0)
    if handler is None:  # nothing listens: take a port and free it
        server = await asyncio.start_server(_silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        return await _send(via, f"http://127.0.0.1:{port}/x", limits)
    async with _serving(handler) as url:
        return await _send(via, f"{url}/x", limits)


VIA = pytest.mark.parametrize("via", ["client", "direct"])


@VIA
def test_an_answer_arrives_whole_with_the_cluster_token_sent(via: str) -> None:
    status, body = asyncio.run(_post(_echo_token, via))
    assert status == 200
    assert body == b"secret|ask|" + BODY


@pytest.mark.parametrize(
    ("handler", "error"),
    [
        (None, httpx.ConnectError),  # refused
        (_cut_mid_answer, httpx.RemoteProtocolError),
        (_closed_unanswered, httpx.RemoteProtocolError),
        (_reset, (httpx.ReadError, httpx.RemoteProtocolError)),  # aiohttp: "disconnected"
    ],
    ids=["refused", "cut-mid-answer", "closed-unanswered", "reset"],
)
@VIA
def test_a_gone_peer_is_a_dropped_connection(
    handler: Handler | None, error: type | tuple[type, ...], via: str
) -> None:
    with pytest.raises(httpx.HTTPError) as got:
        asyncio.run(_post(handler, via))
    assert isinstance(got.value, error), repr(got.value)
    assert dropped(got.value)


@VIA
def test_a_silent_peer_is_a_timeout_not_a_dropped_connection(via: str) -> None:
    with pytest.raises(httpx.HTTPError) as got:
        asyncio.run(_post(_silent, via, timeout=0.3))
    assert isinstance(got.value, httpx.ReadTimeout), repr(got.value)
    assert not dropped(got.value)
