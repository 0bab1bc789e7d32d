"""/readyz: a broker is ready only while it is a member of the cluster (lease current)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import httpx
from starlette.applications import Starlette

from ingest.api.ops import routes
from ingest.service.node_status import NodeStatus


def _probe(ready: bool, loaded: bool, lease: bool) -> tuple[int, str]:
    app = Starlette(routes=routes)
    broker = SimpleNamespace(
        ready=ready,
        cache=SimpleNamespace(loaded=loaded),
        lease_ok=lambda: lease,
        config=SimpleNamespace(broker_id=7),
        replicas=None,  # no partitions hosted: none offline
    )
    app.state.services = SimpleNamespace(status=NodeStatus(broker))  # type: ignore[arg-type]

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://broker") as client:
            return await client.get("/readyz")

    r = asyncio.run(get())
    return r.status_code, r.json()["status"]


def test_ready_when_started_loaded_and_leased() -> None:
    assert _probe(True, True, True) == (200, "ready")


def test_starting_until_started_and_loaded() -> None:
    assert _probe(False, False, False) == (503, "starting")
    assert _probe(True, False, True) == (503, "starting")


def test_a_lapsed_lease_is_not_ready() -> None:
    assert _probe(True, True, False) == (503, "lease lapsed")
