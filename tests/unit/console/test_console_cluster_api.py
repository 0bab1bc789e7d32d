"""The console's API client against a node that closes a keep-alive connection just as the
next request goes out on it (a real socket server: what uvicorn does at its idle timeout)."""

from __future__ import annotations

import asyncio

import pytest

from console.cluster_api import ClusterApi, ConsoleApiError

_OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


async def _closing_server() -> tuple[asyncio.Server, list[bytes]]:
    """Answers the first request of every connection (advertising keep-alive), then reads
    the next request line and closes the connection without answering it."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(_OK)
        await writer.drain()
        with_next = await reader.read(1)  # the pooled connection's next request: dropped
        if with_next:
            seen.append(b"dropped")
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0), seen


def _run(method: str) -> tuple[object, list[bytes]]:
    async def go() -> tuple[object, list[bytes]]:
        server, seen = await _closing_server()
        port = server.sockets[0].getsockname()[1]
        api = ClusterApi(f"http://127.0.0.1:{port}")
        try:
            await api.request(method, "/first", None)
            try:
                return await api.request(method, "/second", None), seen
            except ConsoleApiError as exc:
                return exc, seen
        finally:
            await api.aclose()
            server.close()

    return asyncio.run(go())


def test_a_read_is_sent_again_on_a_fresh_connection() -> None:
    answer, seen = _run("GET")
    assert answer == {}
    assert b"dropped" in seen and sum(1 for s in seen if s.startswith(b"GET /second")) == 1


@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_a_write_is_not_sent_twice(method: str) -> None:
    answer, _ = _run(method)
    assert isinstance(answer, ConsoleApiError) and answer.name == "NETWORK_EXCEPTION"
