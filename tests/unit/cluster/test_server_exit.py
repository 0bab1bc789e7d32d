"""The node hears of SIGTERM the moment it arrives (cluster/http/server.py), before uvicorn
stops serving and long before the app's shutdown runs: a broker then stops shrinking ISRs,
so a clean shutdown never leaves a partition with no in-sync replica to elect."""

from __future__ import annotations

import signal

import uvicorn

from cluster.http.server import _Server


async def _app(scope: object, receive: object, send: object) -> None:  # never called
    raise AssertionError("not served")


def test_a_signal_tells_the_node_then_stops_the_server() -> None:
    calls: list[bool] = []
    server = _Server(uvicorn.Config(_app), lambda: calls.append(True))
    server.handle_exit(signal.SIGTERM, None)
    assert calls == [True]
    assert server.should_exit  # uvicorn's own handling goes on as before


def test_without_a_hook_the_server_is_uvicorns() -> None:
    server = _Server(uvicorn.Config(_app), None)
    server.handle_exit(signal.SIGINT, None)
    assert server.should_exit and not server.force_exit
