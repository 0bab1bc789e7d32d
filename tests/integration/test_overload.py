"""Overload protection on a real broker (issue 8 item 4): floods of oversized and large
requests, slowloris clients and too many long polls get 413 / 503 / 408 answers, the broker
stays up with bounded memory, and every acknowledged record is intact afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson

from tests.integration.brokers import BrokerProcess

Factory = Callable[..., BrokerProcess]
MiB = 1024 * 1024
UPLOAD = 950_000  # under the 1 MiB request limit
LIMITS = [
    *("--max-request-bytes", str(MiB)),
    *("--max-inflight-bytes", str(4 * MiB)),
    *("--request-body-timeout-ms", "3000"),
    *("--max-long-polls", "4"),
]


def _status_kib(pid: int, field: str) -> int:
    """VmRSS / VmHWM (peak RSS) of a process, in KiB, from /proc (no psutil here)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _body(marker: int, size: int) -> bytes:
    value = f"m{marker:06d}" + "x" * (size - 7)
    return b'{"records":[{"value":"%s"}]}' % value.encode()


async def _produce(http: httpx.AsyncClient, body: bytes) -> httpx.Response:
    return await http.post(
        "/topics/flood/records", content=body, headers={"content-type": "application/json"}
    )


async def _chunked(http: httpx.AsyncClient, size: int) -> httpx.Response:
    async def chunks():  # type: ignore[no-untyped-def]
        for _ in range(size // 65536):
            yield b"x" * 65536

    return await http.post(
        "/topics/flood/records", content=chunks(), headers={"content-type": "application/json"}
    )


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(lines[0].split()[1]), headers, body


async def _big_upload(port: int, marker: int) -> tuple[int, dict[str, str], bytes]:
    """A large produce whose client stalls near the end of its body for a while (a busy
    network, or a flood): the broker holds what it has read of it meanwhile."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = _body(marker, UPLOAD)
    head = (
        "POST /topics/flood/records HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    try:
        writer.write(head.encode() + body[:-50_000])
        await asyncio.wait_for(writer.drain(), 20)
        await asyncio.sleep(1.5)  # longer than the broker's 1 s wait for in-flight room
        writer.write(body[-50_000:])
        await asyncio.wait_for(writer.drain(), 20)
        return await asyncio.wait_for(_read_response(reader), 20)
    finally:
        writer.close()


async def _slowloris(port: int, declared: int) -> bytes:
    """Headers, a few body bytes, then a trickle: what comes back before the broker hangs up."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        "POST /topics/flood/records HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    )
    writer.write(head.encode() + b'{"records":[')
    answer = b""
    try:
        for _ in range(40):  # 8 s of trickling at most; the deadline is 1.5 s
            try:
                chunk = await asyncio.wait_for(reader.read(65536), 0.2)
            except TimeoutError:
                writer.write(b" ")
                await writer.drain()
                continue
            if not chunk:
                return answer  # closed by the broker
            answer += chunk
            if answer.startswith(b"HTTP/1.1 503") and b"REQUEST_TIMED_OUT" in answer:
                return answer  # refused room up front: the connection may stay open
    except (ConnectionError, OSError):
        return answer
    finally:
        writer.close()
    raise AssertionError(f"slow client still connected; got {answer[:200]!r}")


async def _long_poll(http: httpx.AsyncClient) -> httpx.Response:
    return await http.get(
        "/topics/idle/partitions/0/records", params={"offset": 0, "wait_ms": 2500}
    )


async def _abuse(broker: BrokerProcess) -> dict[int, int]:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=broker.url, timeout=60, limits=limits) as http:
        slow = [asyncio.ensure_future(_slowloris(broker.port, 500_000)) for _ in range(30)]
        polls = [asyncio.ensure_future(_long_poll(http)) for _ in range(7)]
        oversized = await asyncio.gather(*(_produce(http, _body(0, 2 * MiB)) for _ in range(24)))
        assert {r.status_code for r in oversized} == {413}, oversized[0].text
        # Cut off at the size limit, or refused for room while slow clients hold the budget.
        assert (await _chunked(http, 2 * MiB)).status_code in (413, 503)
        # 60 large uploads at once, ~57 MB: the 4 MiB in-flight budget admits a few at a time.
        uploads = await asyncio.gather(*(_big_upload(broker.port, m) for m in range(60)))
        for answer in await asyncio.gather(*slow):  # timed out, or refused room up front
            assert answer.startswith((b"HTTP/1.1 408", b"HTTP/1.1 503")), answer[:200]
            assert b"REQUEST_TIMED_OUT" in answer
        # Once the slow clients are gone, a normal request is served (on a new connection:
        # the pool's may have idled past the broker's keep-alive timeout meanwhile).
        async with httpx.AsyncClient(base_url=broker.url, timeout=60) as fresh:
            assert (await _produce(fresh, _body(0, 100))).status_code == 200
        poll_status = sorted(r.status_code for r in await asyncio.gather(*polls))
        assert poll_status.count(200) <= 4 and poll_status.count(503) >= 3, poll_status
        statuses = [status for status, _, _ in uploads]
        assert set(statuses) <= {200, 503}, statuses

        # Backpressure, not a livelock: a client that retries after Retry-After gets every
        # upload in, however many were refused in the flood.
        async def until_acked(
            marker: int, status: int, headers: dict[str, str], body: bytes
        ) -> int:
            for _attempt in range(60):
                if status == 0:  # the connection failed: retry, as any client would
                    await asyncio.sleep(0.2)
                else:
                    doc = orjson.loads(body)
                    if status == 200:
                        return int(doc["offsets"][0]["offset"])
                    assert headers["retry-after"].isdigit(), headers
                    assert doc["error_code"] == "REQUEST_TIMED_OUT", doc
                    await asyncio.sleep(min(1.0, int(headers["retry-after"])))
                try:
                    retry = await _produce(http, _body(marker, UPLOAD))
                except httpx.TransportError:
                    # A pooled connection the broker closed while it sat idle (uvicorn's
                    # keep-alive timeout) fails the request sent on it.
                    status, headers, body = 0, {}, b""
                    continue
                status, headers, body = retry.status_code, dict(retry.headers), retry.content
            raise AssertionError(f"upload {marker} never got in")

        offsets = await asyncio.gather(*(until_acked(m, *u) for m, u in enumerate(uploads)))
        acked = dict(enumerate(offsets))
        assert sorted(acked) == list(range(60)), statuses
    return acked


def test_floods_and_slow_clients_do_not_exhaust_the_broker(broker_factory: Factory) -> None:
    broker = broker_factory(extra_args=LIMITS)
    broker.create_topic("flood")
    broker.create_topic("idle")
    broker.produce("flood", [{"value": "warm-up"}])
    assert broker.proc is not None
    pid = broker.proc.pid
    baseline_kib = _status_kib(pid, "VmRSS")

    acked = asyncio.run(_abuse(broker))

    assert broker.proc.poll() is None, broker.log_tail()
    assert broker.http.get("/readyz").status_code == 200
    # Peak memory: without the in-flight budget the stalled uploads alone would hold ~57 MB.
    growth_mib = (_status_kib(pid, "VmHWM") - baseline_kib) / 1024
    assert growth_mib < 40, f"peak RSS grew by {growth_mib:.0f} MiB"
    # Every acknowledged record is there, byte for byte.
    for marker, offset in acked.items():
        doc = broker.fetch("flood", 0, offset, max_records=1)
        assert doc["records"][0]["offset"] == offset
        assert doc["records"][0]["value"] == f"m{marker:06d}" + "x" * (UPLOAD - 7)
