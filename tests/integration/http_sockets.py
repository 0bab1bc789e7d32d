"""Raw HTTP/1.1 sockets for tests of what a server does with a connection (deadlines, caps),
where an HTTP client library would hide it (reconnecting, pooling, its own timeouts)."""

from __future__ import annotations

import asyncio


class NeverClosed(AssertionError):
    """The server kept the connection open past the test's patience."""


async def connect(address: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))


async def fate(reader: asyncio.StreamReader, timeout: float) -> bytes:
    """Everything the server sends until it closes the connection (b"" for a reset).

    Fails when the server has not closed it within `timeout`: the test's own wait running out
    is never the server's answer (in Python 3.11+ TimeoutError is an OSError, so it must be
    told apart from a reset before the OSError below swallows it)."""
    try:
        return await asyncio.wait_for(reader.read(), timeout)
    except TimeoutError:
        raise NeverClosed(f"the server did not close the connection within {timeout} s") from None
    except (ConnectionError, OSError):
        return b""


async def read_response(reader: asyncio.StreamReader, timeout: float = 10) -> tuple[int, bytes]:
    """One response on a kept-alive connection: its status and body (Content-Length framed)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    body = await asyncio.wait_for(reader.readexactly(length), timeout) if length else b""
    return status, body
