"""tests/integration/http_sockets.fate, the wait every connection-deadline test makes on the
server (issue 26): a server that never closes must fail it, whatever the test's patience;
one that closes or resets is its answer."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from tests.integration.http_sockets import NeverClosed, fate


async def _serve(on_connect: str) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if on_connect == "close":
            writer.write(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
            writer.close()
        elif on_connect == "reset":  # SO_LINGER 0: close sends RST
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        else:  # "hold": keep it open, say nothing
            await asyncio.sleep(30)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _fate_of(on_connect: str, timeout: float) -> bytes:
    server, port = await _serve(on_connect)
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await fate(reader, timeout)
        finally:
            writer.close()


def test_a_server_that_never_closes_fails_the_wait() -> None:
    with pytest.raises(NeverClosed, match=r"did not close the connection within 0\.3 s"):
        asyncio.run(_fate_of("hold", 0.3))


def test_a_close_is_the_answer_with_what_was_sent() -> None:
    assert asyncio.run(_fate_of("close", 5)) == b"HTTP/1.1 408 Request Timeout\r\n\r\n"


def test_a_reset_reads_as_nothing() -> None:
    assert asyncio.run(_fate_of("reset", 5)) == b""
