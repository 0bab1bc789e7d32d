"""The concurrency limits of cluster/http/admission.py, in process: slots per principal and
per node for searches, per node for admin requests, given back when an answer ends (or
fails, or its client goes away), and cluster traffic not counted."""

from __future__ import annotations

import asyncio
import contextlib

import orjson
from starlette.types import Message, Receive, Scope, Send

from cluster.authorizer import CLUSTER
from cluster.http.admission import ConcurrencyLimits, ConcurrencyMiddleware

LIMITS = ConcurrencyLimits(searches_per_principal=1, searches_per_node=2, admin_per_node=1)


class Held:
    """An app whose answers wait until released (a long search), or fail when told to."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.fail = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.release.wait()
        if self.fail:
            raise RuntimeError("boom")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _scope(method: str, path: str, principal: str) -> Scope:
    return {"type": "http", "method": method, "path": path, "headers": [],
            "tierlog.principal": principal}  # fmt: skip


async def _call(app: ConcurrencyMiddleware, method: str, path: str, who: str) -> Message:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(_scope(method, path, who), receive, send)
    return sent[0] | {"body": b"".join(m.get("body", b"") for m in sent[1:])}


def test_searches_per_principal_and_node_and_admin_per_node() -> None:
    asyncio.run(_limits())


async def _limits() -> None:
    held = Held()
    app = ConcurrencyMiddleware(held, LIMITS)
    search = "/topics/t/search"
    a = asyncio.create_task(_call(app, "GET", search, "User:a"))
    await asyncio.sleep(0)
    refused = await _call(app, "GET", search, "User:a")
    assert refused["status"] == 429
    assert b"for this principal (at most 1)" in refused["body"]
    assert (b"retry-after", b"1") in refused["headers"]
    b = asyncio.create_task(_call(app, "GET", search, "User:b"))
    await asyncio.sleep(0)
    node = orjson.loads((await _call(app, "GET", search, "User:c"))["body"])
    assert node["error_code"] == "THROTTLING_QUOTA_EXCEEDED" and "on this node" in node["message"]
    relayed = asyncio.create_task(_call(app, "GET", search, CLUSTER))  # not counted
    admin = asyncio.create_task(_call(app, "PATCH", "/topics/t/configs", "User:a"))
    await asyncio.sleep(0)
    assert (await _call(app, "POST", "/topics", "User:b"))["status"] == 429
    assert (await _call(app, "DELETE", "/topics/t", "User:b"))["status"] == 429
    assert app.guard.running == {"search": 2, "admin": 1}
    held.fail = True  # answers that fail give their slots back too
    held.release.set()
    for task in (a, b, relayed, admin):
        with contextlib.suppress(RuntimeError):
            await task
    assert +app.guard.running == {} and not app.guard.by_principal
    held.fail = False
    assert (await _call(app, "GET", search, "User:a"))["status"] == 200
    assert (await _call(app, "GET", "/topics/t", "User:a"))["status"] == 200  # not limited


def test_a_cancelled_answer_gives_its_slot_back() -> None:
    async def run() -> None:
        app = ConcurrencyMiddleware(Held(), LIMITS)
        task = asyncio.create_task(_call(app, "GET", "/topics/t/search", "User:a"))
        await asyncio.sleep(0)
        assert app.guard.by_principal["User:a"] == 1
        task.cancel()  # the client went away: starlette cancels the streaming answer
        await asyncio.gather(task, return_exceptions=True)
        assert not app.guard.by_principal and app.guard.running["search"] == 0

    asyncio.run(run())
