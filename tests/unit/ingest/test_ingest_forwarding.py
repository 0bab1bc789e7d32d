"""A forwarded append's failure says what it proves: not sent, or outcome unknown."""

from __future__ import annotations

import asyncio
import socket

import pytest

from ingest.replication.forwarding import Forwarder
from logformat.errors import ErrorCode, TierlogError


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _append(url: str) -> TierlogError:
    forwarder = Forwarder(lambda: "token", timeout_s=0.3, grace_s=0.0)
    try:
        with pytest.raises(TierlogError) as caught:
            await forwarder.append(url, "t", 0, [bytearray(b"frame")], 1, {})
        return caught.value
    finally:
        await forwarder.close()


def test_no_leader_listening_is_leader_not_available() -> None:
    error = asyncio.run(_append(f"http://127.0.0.1:{_closed_port()}"))
    assert error.code is ErrorCode.LEADER_NOT_AVAILABLE
    assert "nothing was written" in str(error)


async def _against(handler: object) -> TierlogError:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)  # type: ignore[arg-type]
    port = server.sockets[0].getsockname()[1]
    async with server:
        return await _append(f"http://127.0.0.1:{port}")


def test_a_leader_that_takes_the_records_and_goes_quiet_is_request_timed_out() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read(65536)  # takes the request, never answers
            await asyncio.sleep(5)
        finally:  # cancelled when the test's loop ends: close, or the writer warns
            writer.close()

    error = asyncio.run(_against(silent))
    assert error.code is ErrorCode.REQUEST_TIMED_OUT
    assert "may or may not have been written" in str(error)


def test_a_leader_that_drops_the_connection_after_the_request_is_request_timed_out() -> None:
    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        writer.close()

    error = asyncio.run(_against(drop))
    assert error.code is ErrorCode.REQUEST_TIMED_OUT
